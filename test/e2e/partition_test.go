package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// TestPartitionedPrimary partitions the primary's member (central: its pods cut from the other
// members' pods and its agent from the hub, localfed partition) while its agent and pods keep
// running against its own API server. The primary no longer hears its standbys, so its failsafe
// does not keep it: the agent must fence it (relabel it fenced, stop renewing the primary Lease)
// before the hub promotes another member at epoch + 1. Throughout, watches on every member's Pods
// and primary Lease check that there is no instant with two unfenced primaries holding unexpired
// Leases, and that the Lease terms of different members never overlap. When the partition heals,
// central is cleaned up like a returning member.
func TestPartitionedPrimary(t *testing.T) {
	fed.requireHealthy(t)
	const ns, cut = "partition", "central"
	fed.setUp(t, ns, dynamicWeights())
	dbc := newDatabase(ns, "orders", 3, cut)
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before := fed.primaryOn(t, dbc, cut)
	d, err := fed.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	primaryPod := d.Status.Primary.Pod

	watch := watchPrimaries(t, dbc, cut, primaryPod)
	sw := newStopwatch(t)
	heal := fed.partitionForReal(t, cut)
	sw.lap("central partitioned (its agent keeps running)")
	await(t, 2*time.Minute, "fencing and promotion", func(ctx context.Context) (bool, error) {
		s, err := fed.share(ctx, cut, ns, dbc.Name)
		if err != nil {
			return false, err
		}
		for _, p := range s.pods {
			sw.mark("central fenced its primary Pod", p.Name == primaryPod && p.Labels[contract.LabelRole] == contract.PodRoleFenced)
		}
		sw.mark("central's primary Lease expired", s.lease != nil && time.Now().After(s.leaseExpiry()))
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := fed.hub.Get(ctx, client.ObjectKey{Name: cut}, mc); err != nil {
			return false, err
		}
		sw.mark("hub marked central Ready=Unknown", meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions,
			dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown))
		d, err := fed.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		return sw.mark("hub promoted a new primary", d.Status.Primary != nil && d.Status.Primary.Cluster != cut), nil
	})
	fed.awaitFailover(t, sw, dbc, before, cut)

	heal(t)
	sw.lap("partition healed")
	await(t, 2*time.Minute, cut+" cleaned up", func(ctx context.Context) (bool, error) {
		err := fed.converged(ctx, dbc)
		return err == nil, err
	})
	sw.lap("converged with central back: its fenced share removed")
	watch.check(t, sw.start)
}

// primaryWatch follows every member's Pods and primary Lease of one database, and its
// DatabaseCluster, while the primary's member is cut off.
type primaryWatch struct {
	cut, primaryPod string
	watch           *databaseWatch
	bad             violations
	terms           map[string]leaseTerm // by holder and renewal: every Lease term seen
	// fenced and promoted are when the watches first delivered the cut-off member's primary Pod
	// labelled fenced, and a DatabaseCluster whose primary is elsewhere (since: its
	// status.primary.since).
	fenced, promoted, since time.Time
}

// leaseTerm is one renewal of a primary Lease: valid from renewed until expires.
type leaseTerm struct {
	member, holder   string
	renewed, expires time.Time
}

// watchPrimaries checks, in every state the watches deliver, that at most one member has an
// unfenced primary (a Pod labelled primary) and an unexpired primary Lease in its own name. A
// second such member can only appear through a change (a Lease renewed, a Pod relabelled), so
// this checks every instant, as the watches see them.
func watchPrimaries(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, cut, primaryPod string) *primaryWatch {
	w := &primaryWatch{cut: cut, primaryPod: primaryPod, terms: map[string]leaseTerm{}}
	w.watch = fed.watchDatabase(t, dbc, func(st fleetState) {
		now := time.Now()
		for _, p := range st.shares[cut].pods {
			if w.fenced.IsZero() && p.Name == primaryPod && p.Labels[contract.LabelRole] == contract.PodRoleFenced {
				w.fenced = now
			}
		}
		if p := st.dbc.Status.Primary; w.promoted.IsZero() && p != nil && p.Cluster != cut {
			w.promoted, w.since = now, p.Since.Time
		}
		var holding []string
		for _, m := range members {
			s := st.shares[m]
			if s.lease != nil && s.lease.Spec.RenewTime != nil {
				term := leaseTerm{member: m, holder: s.holder(), renewed: s.lease.Spec.RenewTime.Time, expires: s.leaseExpiry()}
				w.terms[term.holder+"@"+term.renewed.String()] = term
			}
			if len(s.primaries()) > 0 && now.Before(s.leaseExpiry()) && strings.HasPrefix(s.holder(), m+"/") {
				holding = append(holding, fmt.Sprintf("%s (%v, Lease %s until %s)", m, s.primaries(), s.holder(), s.leaseExpiry().Format(time.StampMilli)))
			}
		}
		if len(holding) > 1 {
			w.bad.add("at %s: %s", now.Format(time.StampMilli), strings.Join(holding, "; "))
		}
	})
	return w
}

// check stops watching and reports: the cut-off member's primary was fenced before the
// promotion was seen; no state had two unfenced primaries holding unexpired Leases; no two
// members' Lease terms overlapped; and the cut-off member's last term expired before the
// promotion (status.primary.since, whole seconds, rounded down).
func (w *primaryWatch) check(t *testing.T, cutAt time.Time) {
	t.Helper()
	changes := w.watch.stop()
	t.Logf("watches: %s's primary Pod labelled fenced at %+.1fs, the promotion at %+.1fs",
		w.cut, w.fenced.Sub(cutAt).Seconds(), w.promoted.Sub(cutAt).Seconds())
	if w.promoted.IsZero() || w.fenced.IsZero() || !w.fenced.Before(w.promoted) {
		t.Errorf("%s's primary %s was not seen fenced before the promotion", w.cut, w.primaryPod)
	}
	w.bad.report(t, changes, "never two unfenced primaries holding unexpired primary Leases")
	terms := make([]leaseTerm, 0, len(w.terms))
	for _, term := range w.terms {
		terms = append(terms, term)
	}
	slices.SortFunc(terms, func(a, b leaseTerm) int { return a.renewed.Compare(b.renewed) })
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			if a.member != b.member && b.renewed.Before(a.expires) {
				t.Errorf("primary Lease terms overlap: %s until %s, %s from %s", a.holder, a.expires.Format(time.StampMilli),
					b.holder, b.renewed.Format(time.StampMilli))
			}
		}
	}
	// Before the cut only the cut-off member held the Lease; after, only the new primary's.
	var last, next leaseTerm
	for _, term := range terms {
		if term.member == w.cut {
			last = term
		} else if next.holder == "" {
			next = term
		}
	}
	t.Logf("%d primary Lease terms seen; %s's last (%s) expired at %+.1fs, the new primary's first (%s) began at %+.1fs; status.primary.since %s",
		len(terms), w.cut, last.holder, last.expires.Sub(cutAt).Seconds(), next.holder, next.renewed.Sub(cutAt).Seconds(),
		w.since.Format(time.TimeOnly))
	if !last.expires.Before(w.since) {
		t.Errorf("%s's last primary Lease expired at %s, not before the promotion at %s", w.cut, last.expires, w.since)
	}
}
