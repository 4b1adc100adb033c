package databasecluster

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestApplicationFailureIsAvoided(t *testing.T) {
	tolerate := int32(60)
	failover := &dbfleetv1alpha1.FailoverBehavior{Application: &dbfleetv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: dbfleetv1alpha1.DecisionConditions{TolerationSeconds: &tolerate}}}
	dbc := newDB(2)
	dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{{Cluster: "east", Replicas: 1}, {Cluster: "west", Replicas: 1}}
	unavailable := func(since time.Time) *dbfleetv1alpha1.MemberDatabase {
		m := mdb(1, 1, 1, 1, 0)
		m.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse,
			Reason: "Test", LastTransitionTime: metav1.NewTime(since)}}
		return m
	}
	s := &scope{dbc: dbc, members: fleet("east", "west"), memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{
		"east": unavailable(t0), "west": mdb(1, 1, 1, 1, 1, "Available")}}
	avoid, next := avoidClusters(s, failover, t0.Add(45*time.Second))
	if len(avoid) != 0 || next != 16*time.Second {
		t.Errorf("45 s into a 60 s toleration (+1 s for the condition's precision): avoid=%v next=%s, want none and 16s", avoid, next)
	}
	avoid, _ = avoidClusters(s, failover, t0.Add(61*time.Second))
	if avoid["east"] != dbfleetv1alpha1.EvictionApplicationFailure || len(avoid) != 1 {
		t.Errorf("past the toleration: avoid=%v, want east", avoid)
	}
	if avoid, _ := avoidClusters(s, nil, t0.Add(time.Hour)); len(avoid) != 0 {
		t.Errorf("application failover is off without failover.application: avoid=%v", avoid)
	}
}

// A database let through the eviction limit is not charged again when its reconcile is retried
// (its status write failed, say); another database still waits for the refill.
func TestEvictionGrantSurvivesARetry(t *testing.T) {
	r := &Reconciler{EvictionLimiter: rate.NewLimiter(rate.Every(100*time.Second), 1)}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	orders := types.NamespacedName{Namespace: "shop", Name: "orders"}
	payments := types.NamespacedName{Namespace: "shop", Name: "payments"}
	if wait := r.evictionDelay(orders, 1, now); wait != 0 {
		t.Fatalf("first eviction waits %s, want 0 (a full bucket)", wait)
	}
	if wait := r.evictionDelay(orders, 1, now.Add(time.Second)); wait != 0 {
		t.Errorf("the retry of a granted eviction waits %s, want 0", wait)
	}
	if wait := r.evictionDelay(payments, 1, now.Add(time.Second)); wait <= 0 {
		t.Errorf("another database's eviction goes ahead with an empty bucket, want a wait")
	}
	if wait := r.evictionDelay(orders, 1, now.Add(evictionGrantTTL+time.Second)); wait <= 0 {
		t.Errorf("a grant older than %s still lets orders through, want a wait", evictionGrantTTL)
	}
}
