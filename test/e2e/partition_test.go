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
)

// TestPartitionedPrimary cuts the primary member's agent (central) off the hub while it keeps
// running against its member. The agent must fence its primary (relabel it fenced, stop renewing
// the primary Lease) before the hub promotes another member at epoch + 1. Throughout, watches on
// every member's Pods and primary Lease check that there is no instant with two unfenced
// primaries holding unexpired Leases, and that the Lease terms of different members never
// overlap. When the link heals, central is cleaned up like a returning member.
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
	var primaryPod string
	for _, p := range d.Status.Placements {
		if p.Cluster == cut {
			primaryPod = fmt.Sprintf("%s-%d", dbc.Name, p.Ordinals.Start)
		}
	}

	watch := watchPrimaries(t, dbc)
	sw := newStopwatch(t)
	fed.partition(t, cut)
	sw.lap("central's agent cut off the hub (it keeps running)")
	const fenced, promoted = "central fenced its primary Pod", "hub promoted a new primary"
	var promotedSince time.Time
	await(t, 2*time.Minute, "fencing and promotion", func(ctx context.Context) (bool, error) {
		s, err := fed.share(ctx, cut, ns, dbc.Name)
		if err != nil {
			return false, err
		}
		for _, p := range s.pods {
			sw.mark(fenced, p.Name == primaryPod && p.Labels[dbfleetv1alpha1.LabelRole] == string(dbfleetv1alpha1.RoleFenced))
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
		if sw.mark(promoted, d.Status.Primary != nil && d.Status.Primary.Cluster != cut) {
			promotedSince = d.Status.Primary.Since.Time
			return true, nil
		}
		return false, nil
	})
	fencedAt, wasFenced := sw.at(fenced)
	promotedAt, _ := sw.at(promoted)
	if !wasFenced || fencedAt >= promotedAt {
		t.Errorf("the hub promoted (seen at %.1fs) before central fenced its primary (seen: %t, at %.1fs)",
			promotedAt.Seconds(), wasFenced, fencedAt.Seconds())
	}
	fed.awaitFailover(t, sw, dbc, before, cut)

	fed.proxies[cut].Heal()
	sw.lap("link healed")
	await(t, 2*time.Minute, cut+" cleaned up", func(ctx context.Context) (bool, error) {
		err := fed.converged(ctx, dbc)
		return err == nil, err
	})
	sw.lap("converged with central back: its fenced share removed")
	watch.check(t, cut, promotedSince)
}

// primaryWatch follows every member's Pods and primary Lease of one database.
type primaryWatch struct {
	watch *databaseWatch
	bad   violations
	terms map[string]leaseTerm // by holder and renewal: every Lease term seen
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
func watchPrimaries(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster) *primaryWatch {
	w := &primaryWatch{terms: map[string]leaseTerm{}}
	w.watch = fed.watchDatabase(t, dbc, func(st fleetState) {
		now := time.Now()
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

// check stops watching and reports: no state with two unfenced primaries holding unexpired
// Leases; no two members' Lease terms overlapping; and the cut-off member's last term expired
// before the promotion (status.primary.since, whole seconds, rounded down).
func (w *primaryWatch) check(t *testing.T, cut string, promotedSince time.Time) {
	t.Helper()
	w.bad.report(t, w.watch.stop(), "never two unfenced primaries holding unexpired primary Leases")
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
		if term.member == cut {
			last = term
		} else if next.holder == "" {
			next = term
		}
	}
	t.Logf("%d primary Lease terms seen; %s's last (%s) expired at %s, the new primary's first (%s) began at %s, promotion at %s",
		len(terms), cut, last.holder, last.expires.Format(time.StampMilli), next.holder, next.renewed.Format(time.StampMilli),
		promotedSince.Format(time.Stamp))
	if !last.expires.Before(promotedSince) {
		t.Errorf("%s's last primary Lease expired at %s, not before the promotion at %s", cut, last.expires, promotedSince)
	}
}
