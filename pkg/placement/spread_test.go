package placement

import (
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
)

func spread(p policyv1alpha1.Placement, constraints ...policyv1alpha1.SpreadConstraint) policyv1alpha1.Placement {
	p.SpreadConstraints = constraints
	return p
}

func by(field policyv1alpha1.SpreadFieldValue, minGroups, maxGroups int) policyv1alpha1.SpreadConstraint {
	return policyv1alpha1.SpreadConstraint{SpreadByField: field, MinGroups: minGroups, MaxGroups: maxGroups}
}

// regional is a fleet of three regions of two zones each, one cluster per zone, with capacity
// growing by name so rankings are predictable: eu-1a has 1, eu-1b 2, ... us-1b 6.
func regional() []Cluster {
	var out []Cluster
	capacity := int32(1)
	for _, region := range []string{"eu", "ap", "us"} {
		for _, zone := range []string{"a", "b"} {
			c := inRegion(ready(region+"-1"+zone, capacity), region, region+"-1"+zone)
			c.Provider = map[string]string{"eu": "aws", "ap": "gcp", "us": "aws"}[region]
			out = append(out, c)
			capacity++
		}
	}
	return out
}

func TestSpreadConstraints(t *testing.T) {
	tests := []struct {
		name      string
		placement policyv1alpha1.Placement
		replicas  int32
		previous  *Decision
		want      string
	}{
		{name: "cluster maxGroups takes the roomiest clusters", replicas: 2,
			placement: spread(duplicatedPlacement(), by("cluster", 1, 2)), want: "us-1a=2 us-1b=2"},
		{name: "cluster maxGroups prefers clusters holding replicas", replicas: 2, previous: previous("eu-1a", 2, "ap-1a", 2),
			placement: spread(duplicatedPlacement(), by("cluster", 1, 2)), want: "ap-1a=2 eu-1a=2"},
		{name: "region minGroups picks that many regions, best first, filling them", replicas: 2,
			placement: spread(duplicatedPlacement(), by("region", 2, 3)), want: "ap-1a=2 ap-1b=2 us-1a=2 us-1b=2"},
		{name: "one cluster per region when clusters are capped", replicas: 2,
			placement: spread(duplicatedPlacement(), by("region", 3, 3), by("cluster", 3, 3)), want: "ap-1b=2 eu-1b=2 us-1b=2"},
		{name: "zone spread", replicas: 1,
			placement: spread(duplicatedPlacement(), by("zone", 4, 0), by("cluster", 1, 4)), want: "ap-1a=1 ap-1b=1 us-1a=1 us-1b=1"},
		{name: "provider spread", replicas: 1,
			placement: spread(duplicatedPlacement(), by("provider", 2, 2), by("cluster", 2, 2)), want: "ap-1b=1 us-1b=1"},
		{name: "dynamic weight: more regions when the first cannot hold the replicas", replicas: 14,
			placement: spread(dynamicPlacement(), by("region", 1, 3)), want: "ap-1a=2 ap-1b=3 us-1a=4 us-1b=5"},
		{name: "dynamic weight: divided within the chosen region", replicas: 6,
			placement: spread(dynamicPlacement(), by("region", 1, 1)), want: "us-1a=3 us-1b=3"},
		{name: "aggregated: fewest clusters within the chosen regions", replicas: 6,
			placement: spread(aggregatedPlacement(), by("region", 2, 2)), want: "us-1b=6"},
		{name: "static weights ignore spread selection (as Karmada)", replicas: 6,
			placement: spread(staticPlacement(nil), by("cluster", 1, 2)), want: "ap-1a=1 ap-1b=1 eu-1a=1 eu-1b=1 us-1a=1 us-1b=1"},
		{name: "region maxGroups keeps holders only within the maximum", replicas: 2, previous: previous("eu-1a", 1, "ap-1a", 1, "us-1a", 0),
			placement: spread(dynamicPlacement(), by("region", 1, 1)), want: "ap-1a=1 ap-1b=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustSchedule(t, Input{Replicas: tt.replicas, Clusters: regional(), Placement: tt.placement, Previous: tt.previous})
			if got := sharesOf(d); got != tt.want {
				t.Errorf("shares = %s, want %s", got, tt.want)
			}
			for _, e := range d.Excluded {
				if e.Reason == "" {
					t.Errorf("%s excluded without reason", e.Cluster)
				}
			}
		})
	}
}

func TestSpreadMissingFieldFiltersEvenForStaticWeights(t *testing.T) {
	clusters := append(regional(), ready("bare", 10))
	d := mustSchedule(t, Input{Replicas: 7, Clusters: clusters, Placement: spread(staticPlacement(nil), by("zone", 1, 0))})
	if e, _ := exclusionOf(d, "bare"); e.Reason != ReasonMissingZone {
		t.Errorf("bare excluded for %q, want %q", e.Reason, ReasonMissingZone)
	}
	if d.ShareOf("bare") != 0 || d.TotalReplicas() != 7 {
		t.Errorf("shares %s", sharesOf(d))
	}
}

func TestSpreadUnchosenClustersAreExplained(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 2, Clusters: regional(), Placement: spread(duplicatedPlacement(), by("cluster", 1, 2))})
	e, _ := exclusionOf(d, "eu-1a")
	if e.Reason != ReasonNotSelected {
		t.Errorf("eu-1a excluded for %q, want %q", e.Reason, ReasonNotSelected)
	}
}
