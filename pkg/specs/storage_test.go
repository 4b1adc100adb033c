package specs

import "testing"

func TestIsDataClaim(t *testing.T) {
	for claim, want := range map[string]bool{
		"data-orders-0":         true,
		"data-orders-1001":      true,
		"data-orders-archive-0": false, // the claim of StatefulSet orders-archive
		"data-orders-":          false,
		"data-orders-x":         false,
		"logs-orders-0":         false,
	} {
		if got := IsDataClaim("orders", claim); got != want {
			t.Errorf("IsDataClaim(orders, %s) = %v, want %v", claim, got, want)
		}
	}
}
