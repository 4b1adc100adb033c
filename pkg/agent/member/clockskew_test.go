package member

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The agent compares each instance's clock, as its /status answer gives it, with its own: an
// agent an hour ahead of its pods sees the share's clocks disagree (the condition the hub keeps
// the primary off the cluster by); one a few hundred milliseconds off does not.
func TestAgentSeesItsInstancesClocksDisagree(t *testing.T) {
	// Both clocks stand still, so the offset is exact however long the request takes on a busy
	// machine (read on the running clock, an hour came out as 59m59.996s ±4ms).
	instanceNow := time.Now().UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(contract.Status{Pod: "orders-0", Role: contract.RolePrimary, Epoch: 1,
			Time: instanceNow.Format(time.RFC3339Nano)})
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name       string
		offset     time.Duration
		skewed     bool
		msgSubstrs []string
	}{
		{"agent an hour ahead", time.Hour, true, []string{"orders-0", "1h0m0s behind the agent's", "keeps the primary off this cluster"}},
		{"agent an hour behind", -time.Hour, true, []string{"1h0m0s ahead of the agent's"}},
		{"agent 300ms ahead", 300 * time.Millisecond, false, []string{"agree with the agent's within 1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agentClock := func() time.Time { return instanceNow.Add(tc.offset) }
			reports := readInstances(context.Background(), http.DefaultClient, agentClock, []instanceTarget{{pod: "orders-0", url: srv.URL + "/status"}})
			measured, skewed, msg := shareClocks(reports)
			if !measured || skewed != tc.skewed {
				t.Fatalf("measured %t skewed %t (%s), want measured, skewed %t", measured, skewed, msg, tc.skewed)
			}
			for _, s := range tc.msgSubstrs {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
		})
	}
}

// An instance whose answer carries no time (an older instance manager) or that cannot be read
// says nothing about the clocks: no condition rather than a guess.
func TestNoClockReadingWithoutTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"pod":"orders-0","role":"standby","epoch":1}`))
	}))
	defer srv.Close()
	reports := readInstances(context.Background(), http.DefaultClient, func() time.Time { return time.Now().Add(time.Hour) },
		[]instanceTarget{{pod: "orders-0", url: srv.URL + "/status"}, {pod: "orders-1"}})
	if measured, skewed, msg := shareClocks(reports); measured || skewed || msg != "" {
		t.Errorf("measured %t skewed %t %q, want nothing measured", measured, skewed, msg)
	}
}

// A reading is off only by more than the allowance plus half the round trip: a slow answer
// widens the doubt instead of inventing a skew.
func TestClockReadingAllowsForTheRoundTrip(t *testing.T) {
	sent := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	received := sent.Add(900 * time.Millisecond)
	instance := sent.Add(450*time.Millisecond + 1400*time.Millisecond).Format(time.RFC3339Nano) // 1.4 s ahead of the middle
	if c := readClock(instance, sent, received); !c.ok || c.offset != 1400*time.Millisecond || c.skewed() {
		t.Errorf("reading %+v skewed %t, want 1.4s ± 450ms, not certainly over 1s", c, c.skewed())
	}
	if c := readClock(instance, sent, sent.Add(100*time.Millisecond)); !c.ok || !c.skewed() {
		t.Errorf("reading %+v, want certainly over 1s with a 100ms round trip", c)
	}
}
