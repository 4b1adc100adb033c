package scheduling

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/scheduling/schedulingtest"
)

// The shared builders, under the short names these tests use.
var (
	t0               = schedulingtest.T0
	fleet            = schedulingtest.Fleet
	unreachableSince = schedulingtest.UnreachableSince
	staticPolicy     = schedulingtest.StaticPolicy
	newDB            = schedulingtest.NewDB
)

func TestNothingMovesBackToAReturningCluster(t *testing.T) {
	members := fleet("east", "west", "central")
	pps := staticPolicy(map[string]int64{"east": 1, "west": 1, "central": 1}, nil)
	dbc := newDB(6)
	Schedule(dbc, pps, nil, members, t0, Options{})
	if got := sharesOf(dbc); got["east"] != 2 || got["west"] != 2 || got["central"] != 2 {
		t.Fatalf("first placement: %v", got)
	}
	// east is lost long enough for the default 10 s toleration to run out.
	unreachableSince(members["east"], t0)
	out := Schedule(dbc, pps, nil, members, t0.Add(11*time.Second), Options{})
	if out.Kept || sharesOf(dbc)["east"] != 0 || sharesOf(dbc)["west"]+sharesOf(dbc)["central"] != 6 {
		t.Fatalf("east's share was not re-placed: kept=%v %v", out.Kept, sharesOf(dbc))
	}
	if len(dbc.Status.Evictions) != 1 || dbc.Status.Evictions[0].Cluster != "east" ||
		dbc.Status.Evictions[0].Reason != dbfleetv1alpha1.EvictionClusterFailure ||
		dbc.Status.Evictions[0].PurgeMode != dbfleetv1alpha1.PurgeGracefully || dbc.Status.Evictions[0].PurgeAfter == nil {
		t.Fatalf("evictions = %+v, want east kept Gracefully", dbc.Status.Evictions)
	}
	// east returns; its evicted share was purged meanwhile.
	members = fleet("east", "west", "central")
	dbc.Status.Evictions = nil
	before := sharesOf(dbc)
	out = Schedule(dbc, pps, nil, members, t0.Add(time.Minute), Options{})
	if !out.Kept || !maps.Equal(sharesOf(dbc), before) {
		t.Errorf("replicas moved back to east on their own: kept=%v %v", out.Kept, sharesOf(dbc))
	}
	// A rebalance asks for the policy's layout again.
	dbc.Annotations = map[string]string{dbfleetv1alpha1.AnnotationRebalance: "now"}
	out = Schedule(dbc, pps, nil, members, t0.Add(2*time.Minute), Options{})
	if out.Kept || sharesOf(dbc)["east"] != 2 || dbc.Status.ObservedRebalance != "now" {
		t.Errorf("rebalance: kept=%v %v observed=%q", out.Kept, sharesOf(dbc), dbc.Status.ObservedRebalance)
	}
	if out := Schedule(dbc, pps, nil, members, t0.Add(3*time.Minute), Options{}); !out.Kept {
		t.Error("the same annotation value re-placed again")
	}
}

func TestEvictedShareKeepsItsClusterAndOrdinalsOut(t *testing.T) {
	members := fleet("east", "west", "central")
	pps := staticPolicy(map[string]int64{"east": 1, "west": 1, "central": 1}, nil)
	dbc := newDB(3)
	Schedule(dbc, pps, nil, members, t0, Options{})
	var eastOrdinals dbfleetv1alpha1.OrdinalRange
	for _, p := range dbc.Status.Placements {
		if p.Cluster == "east" {
			eastOrdinals = p.Ordinals
		}
	}
	// Another change (replicas 3 → 4) while east's evicted share is kept: east gets nothing,
	// and no new range overlaps its ordinals.
	dbc.Status.Evictions = []dbfleetv1alpha1.Eviction{{Cluster: "east", Replicas: 1, Ordinals: eastOrdinals,
		Reason: dbfleetv1alpha1.EvictionClusterFailure, PurgeMode: dbfleetv1alpha1.PurgeNever}}
	dbc.Spec.Replicas, dbc.Generation = 4, 2
	avoid := map[string]dbfleetv1alpha1.EvictionReason{"east": dbfleetv1alpha1.EvictionClusterFailure}
	out := Schedule(dbc, pps, nil, members, t0.Add(time.Minute), Options{Avoid: avoid})
	if out.Decision == nil || sharesOf(dbc)["east"] != 0 || sharesOf(dbc)["west"]+sharesOf(dbc)["central"] != 4 {
		t.Fatalf("placement with east avoided: %v (%v)", sharesOf(dbc), out.Err)
	}
	for _, p := range dbc.Status.Placements {
		if p.Ordinals.Start < eastOrdinals.Start+eastOrdinals.Count && eastOrdinals.Start < p.Ordinals.Start+p.Ordinals.Count {
			t.Errorf("%s got ordinals %+v overlapping east's kept %+v", p.Cluster, p.Ordinals, eastOrdinals)
		}
	}
	found := false
	for _, e := range out.Decision.Excluded {
		found = found || e.Cluster == "east" && e.Reason == ReasonEvictedShareKept
	}
	if !found {
		t.Errorf("east's exclusion is not explained: %+v", out.Decision.Excluded)
	}
}

func TestPurgeModes(t *testing.T) {
	seconds := int32(30)
	for _, tc := range []struct {
		name      string
		failover  *dbfleetv1alpha1.FailoverBehavior
		wantKept  bool
		wantMode  dbfleetv1alpha1.PurgeMode
		wantGrace time.Duration
	}{
		{"default is graceful", nil, true, dbfleetv1alpha1.PurgeGracefully, dbfleetv1alpha1.DefaultGracePeriodSeconds * time.Second},
		{"graceful with a grace period", &dbfleetv1alpha1.FailoverBehavior{Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{
			PurgeMode: dbfleetv1alpha1.PurgeGracefully, GracePeriodSeconds: &seconds}}, true, dbfleetv1alpha1.PurgeGracefully, 30 * time.Second},
		{"never", &dbfleetv1alpha1.FailoverBehavior{Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{
			PurgeMode: dbfleetv1alpha1.PurgeNever}}, true, dbfleetv1alpha1.PurgeNever, 0},
		{"immediately", &dbfleetv1alpha1.FailoverBehavior{Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{
			PurgeMode: dbfleetv1alpha1.PurgeImmediately}}, false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := fleet("east", "west")
			pps := staticPolicy(map[string]int64{"east": 1, "west": 1}, tc.failover)
			dbc := newDB(2)
			Schedule(dbc, pps, nil, members, t0, Options{})
			unreachableSince(members["east"], t0)
			now := t0.Add(11 * time.Second)
			out := Schedule(dbc, pps, nil, members, now, Options{})
			if out.FailureEvictions() != 1 {
				t.Errorf("FailureEvictions = %d, want 1", out.FailureEvictions())
			}
			if !tc.wantKept {
				if len(dbc.Status.Evictions) != 0 || len(out.Purged) != 1 || out.Purged[0] != "east" {
					t.Errorf("evictions %+v, purged %v; want east purged at once", dbc.Status.Evictions, out.Purged)
				}
				return
			}
			if len(dbc.Status.Evictions) != 1 {
				t.Fatalf("evictions = %+v", dbc.Status.Evictions)
			}
			e := dbc.Status.Evictions[0]
			if e.PurgeMode != tc.wantMode || e.Replicas != 1 {
				t.Errorf("eviction = %+v, want mode %s with 1 replica", e, tc.wantMode)
			}
			if (e.PurgeAfter != nil) != (tc.wantGrace > 0) || e.PurgeAfter != nil && !e.PurgeAfter.Time.Equal(now.Add(tc.wantGrace)) {
				t.Errorf("purgeAfter = %v, want now + %s", e.PurgeAfter, tc.wantGrace)
			}
		})
	}
}

func TestUnschedulableEvictionKeepsTheShare(t *testing.T) {
	members := fleet("east", "west")
	pps := staticPolicy(map[string]int64{"east": 1}, nil) // only east has a weight
	pps[0].Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}
	dbc := newDB(2)
	Schedule(dbc, pps, nil, members, t0, Options{})
	unreachableSince(members["east"], t0)
	out := Schedule(dbc, pps, nil, members, t0.Add(time.Minute), Options{})
	if out.Err == nil || sharesOf(dbc)["east"] != 2 || len(dbc.Status.Evictions) != 0 {
		t.Fatalf("with nowhere to go the share must stay: err=%v %v evictions=%+v", out.Err, sharesOf(dbc), dbc.Status.Evictions)
	}
	c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != dbfleetv1alpha1.ReasonUnschedulable {
		t.Errorf("Scheduled = %+v, want False/Unschedulable saying the placement is kept", c)
	}
}

func TestDuplicatedFollowsTheFleet(t *testing.T) {
	members := fleet("east", "west")
	pp := dbfleetv1alpha1.PropagationPolicy{}
	pp.Name, pp.Namespace = "dup", "ns"
	pp.Spec.ResourceSelectors = []dbfleetv1alpha1.ResourceSelector{{}}
	pps := []dbfleetv1alpha1.PropagationPolicy{pp}
	dbc := newDB(1)
	Schedule(dbc, pps, nil, members, t0, Options{})
	members["central"] = fleet("central")["central"]
	if out := Schedule(dbc, pps, nil, members, t0.Add(time.Second), Options{}); out.Kept || sharesOf(dbc)["central"] != 1 {
		t.Errorf("a new cluster gets its copy under Duplicated: kept=%v %v", out.Kept, sharesOf(dbc))
	}
}

func sharesOf(dbc *dbfleetv1alpha1.DatabaseCluster) map[string]int32 {
	out := map[string]int32{}
	for _, p := range dbc.Status.Placements {
		out[p.Cluster] = p.Replicas
	}
	return out
}

// The hub hands Schedule the cache's own policies and MemberClusters (no deep copy), so
// scheduling must only read them, through placements, a failover and evictions.
func TestScheduledMessageStaysShortOnLargeFleets(t *testing.T) {
	d := placement.Decision{Primary: "c0000"}
	for i := range 1000 {
		name := fmt.Sprintf("c%04d", i)
		if i < 10 {
			d.Shares = append(d.Shares, placement.Share{Cluster: name, Replicas: 1})
		} else {
			d.Excluded = append(d.Excluded, placement.Exclusion{Cluster: name, Reason: "excluded by clusterAffinity"})
		}
	}
	msg := scheduledMessage(d)
	if len(msg) > 400 {
		t.Errorf("message is %d bytes for 1000 clusters:\n%s", len(msg), msg)
	}
	for _, want := range []string{"10 replicas on", "and 5 more clusters", "990 excluded by clusterAffinity", "and 985 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestScheduleLeavesPoliciesAndMembersAsTheyWere(t *testing.T) {
	seconds := int32(30)
	members := fleet("east", "west", "central")
	pps := staticPolicy(map[string]int64{"east": 2, "west": 1, "central": 1}, &dbfleetv1alpha1.FailoverBehavior{
		Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{PurgeMode: dbfleetv1alpha1.PurgeGracefully, GracePeriodSeconds: &seconds}})
	// Room to grow in place: an append that wrote into the cached slice would go unnoticed otherwise.
	tolerations := make([]corev1.Toleration, 1, 8)
	tolerations[0] = corev1.Toleration{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	pps[0].Spec.Placement.ClusterTolerations = tolerations
	dbc := newDB(4)
	dbc.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{"east"}}

	wantPolicies := []dbfleetv1alpha1.PropagationPolicy{*pps[0].DeepCopy()}
	Schedule(dbc, pps, nil, members, t0, Options{})
	unreachableSince(members["east"], t0.Add(time.Second))
	wantMembers := map[string]*dbfleetv1alpha1.MemberCluster{}
	for n, mc := range members {
		wantMembers[n] = mc.DeepCopy()
	}
	for _, at := range []time.Duration{2 * time.Second, time.Minute, 2 * time.Minute} {
		Schedule(dbc, pps, nil, members, t0.Add(at), Options{})
	}
	if dbc.Status.Primary == nil || dbc.Status.Primary.Cluster == "east" {
		t.Fatalf("the primary did not leave the unreachable cluster: %+v", dbc.Status.Primary)
	}
	if !equality.Semantic.DeepEqual(pps, wantPolicies) || tolerations[:2][1] != (corev1.Toleration{}) {
		t.Errorf("Schedule changed the policy:\n got %+v\nwant %+v", pps[0].Spec, wantPolicies[0].Spec)
	}
	if !equality.Semantic.DeepEqual(members, wantMembers) {
		t.Error("Schedule changed a MemberCluster")
	}
}

// A switchover to a cluster that holds no replica cannot happen yet: the outcome says why, the
// preference is not recorded as honoured, and the switchover happens once the cluster gets one.
func TestASwitchoverThatCannotHappenStaysAskedFor(t *testing.T) {
	members := fleet("east", "west", "north")
	pps := staticPolicy(map[string]int64{"east": 1, "west": 1}, nil) // north gets nothing
	dbc := newDB(2)
	Schedule(dbc, pps, nil, members, t0, Options{})
	first := dbc.Status.Primary.Cluster
	if first == "north" || first == "" {
		t.Fatalf("first primary %q", first)
	}

	dbc.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{"north"}}
	dbc.Generation = 2
	for i := range 2 {
		out := Schedule(dbc, pps, nil, members, t0.Add(time.Duration(i+1)*time.Minute), Options{})
		if !strings.Contains(out.PendingSwitchover, "north") || !strings.Contains(out.PendingSwitchover, "holds no replica") {
			t.Errorf("pass %d: PendingSwitchover = %q, want why north cannot take the primary", i, out.PendingSwitchover)
		}
		if p := dbc.Status.Primary; p.Cluster != first || p.Preferred == "north" {
			t.Errorf("pass %d: primary %+v, want it to stay on %s with the switchover still asked for", i, p, first)
		}
	}

	// The policy now gives north a share: the switchover happens.
	pps = staticPolicy(map[string]int64{"east": 1, "west": 1, "north": 2}, nil)
	pps[0].Generation = 2
	out := Schedule(dbc, pps, nil, members, t0.Add(time.Hour), Options{})
	if p := dbc.Status.Primary; p.Cluster != "north" || p.Preferred != "north" || !out.PrimaryMoved || out.PendingSwitchover != "" {
		t.Errorf("after north got a share: primary %+v, moved %v, pending %q; want the primary on north", p, out.PrimaryMoved, out.PendingSwitchover)
	}
}

// A failover away from the preferred cluster is not a new preference: when that cluster returns,
// the primary stays where the failover put it (an automatic switch back would be a surprise move
// of the primary, and flapping under an unstable cluster). Only a change of
// spec.primary.preferredClusters asks for a switchover.
func TestAFailoverDoesNotSwitchBackToThePreferredCluster(t *testing.T) {
	members := fleet("east", "west", "central")
	pps := staticPolicy(map[string]int64{"east": 1, "west": 1, "central": 1}, nil)
	dbc := newDB(3)
	dbc.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{"east"}}
	Schedule(dbc, pps, nil, members, t0, Options{})
	if p := dbc.Status.Primary; p == nil || p.Cluster != "east" || p.Preferred != "east" {
		t.Fatalf("first primary %+v, want east, preferred east", p)
	}
	unreachableSince(members["east"], t0)
	Schedule(dbc, pps, nil, members, t0.Add(11*time.Second), Options{})
	failedOver := *dbc.Status.Primary
	if failedOver.Cluster == "east" || failedOver.Epoch != 2 {
		t.Fatalf("after east was lost: primary %+v, want another cluster at epoch 2", failedOver)
	}
	// east returns, with a share again (a rebalance gives it one).
	members = fleet("east", "west", "central")
	dbc.Status.Evictions = nil
	dbc.Annotations = map[string]string{dbfleetv1alpha1.AnnotationRebalance: "now"}
	for i := range 2 {
		out := Schedule(dbc, pps, nil, members, t0.Add(time.Duration(i+1)*time.Minute), Options{})
		if out.PendingSwitchover != "" || out.PrimaryMoved {
			t.Errorf("pass %d: pending %q, moved %v: a returning preferred cluster asked for a switchover", i, out.PendingSwitchover, out.PrimaryMoved)
		}
		if p := dbc.Status.Primary; p.Cluster != failedOver.Cluster || p.Epoch != failedOver.Epoch {
			t.Errorf("pass %d: primary %+v, want it to stay %s at epoch %d", i, p, failedOver.Cluster, failedOver.Epoch)
		}
	}
}

// A switchover to a set of clusters (a version roll's) moves a healthy primary into the set at
// the next epoch and leaves the preference as it was: once the roll stops asking, the primary
// stays where it went, and no switchover back to spec.primary.preferredClusters[0] is asked for.
func TestASwitchoverToASetMovesThePrimaryAndKeepsThePreference(t *testing.T) {
	members := fleet("east", "west", "central")
	pps := staticPolicy(map[string]int64{"east": 1, "west": 1, "central": 1}, nil)
	dbc := newDB(3)
	dbc.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{"east"}}
	Schedule(dbc, pps, nil, members, t0, Options{})
	if p := dbc.Status.Primary; p == nil || p.Cluster != "east" || p.Preferred != "east" {
		t.Fatalf("first primary %+v, want east, preferred east", p)
	}
	out := Schedule(dbc, pps, nil, members, t0.Add(time.Minute), Options{SwitchoverTo: []string{"west"}})
	if p := dbc.Status.Primary; !out.PrimaryMoved || out.PrimaryFrom != "east" || p.Cluster != "west" || p.Epoch != 2 || p.Preferred != "east" {
		t.Fatalf("switchover to west: moved %v from %q, primary %+v; want west at epoch 2, preferred still east", out.PrimaryMoved, out.PrimaryFrom, p)
	}
	for i := range 2 {
		out := Schedule(dbc, pps, nil, members, t0.Add(time.Duration(i+2)*time.Minute), Options{})
		if out.PrimaryMoved || out.PendingSwitchover != "" || dbc.Status.Primary.Cluster != "west" {
			t.Errorf("pass %d after the roll: moved %v, pending %q, primary %+v; want it to stay on west", i, out.PrimaryMoved, out.PendingSwitchover, dbc.Status.Primary)
		}
	}
}

// Scheduling counts what an outcome would evict, and records no metric itself: the hub counts
// once it adopts the outcome, `hub plan` never.
func TestOutcomeCountsEvictionsByReason(t *testing.T) {
	members := fleet("east", "west", "central")
	pps := staticPolicy(map[string]int64{"east": 1, "west": 1, "central": 1}, nil)
	dbc := newDB(3)
	Schedule(dbc, pps, nil, members, t0, Options{})
	unreachableSince(members["east"], t0)
	out := Schedule(dbc, pps, nil, members, t0.Add(11*time.Second), Options{})
	if out.Evictions[dbfleetv1alpha1.EvictionClusterFailure] != 1 || len(out.Evictions) != 1 || out.FailureEvictions() != 1 {
		t.Errorf("evictions %v (failures %d), want one ClusterFailure", out.Evictions, out.FailureEvictions())
	}
}
