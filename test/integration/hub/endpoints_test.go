package hub

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/test/framework"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// reportEndpoints sets a share's status.endpoints as its agent does: a merge patch of the status,
// which the hub's concurrent writes of the share's spec cannot make conflict (an update of what
// was read could, and did once in CI).
func (f *fixture) reportEndpoints(mdb *dbfleetv1alpha1.MemberDatabase, e *dbfleetv1alpha1.DatabaseEndpoints) {
	f.t.Helper()
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
		f.t.Fatal(err)
	}
	before := fresh.DeepCopy()
	fresh.Status.Endpoints = e
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, what, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		f.t.Fatal(err)
	}
}

// The primary share's reported address reaches every other share as spec.primaryEndpoint and the
// DatabaseCluster as status.endpoints; the primary share learns the other clusters' pods as its
// standbys; each share carries its cluster's spec.databaseNetwork.
func TestPrimaryEndpointAndStandbysReachEveryShare(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.updateMember(b, func(mc *dbfleetv1alpha1.MemberCluster) {
		mc.Spec.DatabaseNetwork = dbfleetv1alpha1.DatabaseNetworkLoadBalancer
	})
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 4, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 2
	})
	mdbs := f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	primary := dbc.Status.Primary.Cluster
	other := a
	if primary == a {
		other = b
	}
	var otherPods []string
	for _, p := range dbc.Status.Placements {
		if p.Cluster == other {
			for i := range p.Ordinals.Count {
				otherPods = append(otherPods, fmt.Sprintf("orders-%d", p.Ordinals.Start+i))
			}
		}
	}

	f.reportEndpoints(mdbs[primary], &dbfleetv1alpha1.DatabaseEndpoints{ReadWrite: "10.1.0.5:5432", ReadOnly: []string{"10.1.0.6:5432"}})
	f.reportEndpoints(mdbs[other], &dbfleetv1alpha1.DatabaseEndpoints{ReadOnly: []string{"10.2.0.7:5432", "10.2.0.8:5432"}})
	got := f.waitDatabase("orders", "status.endpoints", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Endpoints != nil && d.Status.Endpoints.ReadWrite == "10.1.0.5:5432" && len(d.Status.Endpoints.ReadOnly) == 3
	})
	if want := []string{"10.1.0.6:5432", "10.2.0.7:5432", "10.2.0.8:5432"}; !slices.Equal(got.Status.Endpoints.ReadOnly, want) {
		t.Errorf("readOnly = %v, want %v", got.Status.Endpoints.ReadOnly, want)
	}
	f.eventually("every share told the primary endpoint, the primary its standbys", func() bool {
		m := f.placedMemberDatabases("orders")
		return m[other] != nil && m[other].Spec.PrimaryEndpoint == "10.1.0.5:5432" &&
			m[primary] != nil && m[primary].Spec.PrimaryEndpoint == "10.1.0.5:5432" && slices.Equal(m[primary].Spec.Standbys, otherPods)
	})
	m := f.placedMemberDatabases("orders")
	if len(m[other].Spec.Standbys) != 0 {
		t.Errorf("a replica share got standbys %v", m[other].Spec.Standbys)
	}
	wantNet := map[string]dbfleetv1alpha1.DatabaseNetwork{a: "", b: dbfleetv1alpha1.DatabaseNetworkLoadBalancer}
	for cluster, want := range wantNet {
		if m[cluster].Spec.Network != want {
			t.Errorf("share on %s has network %q, want %q", cluster, m[cluster].Spec.Network, want)
		}
	}

	// The primary moves to another pod address (a restarted pod): the shares follow.
	f.reportEndpoints(mdbs[primary], &dbfleetv1alpha1.DatabaseEndpoints{ReadWrite: "10.1.0.9:5432"})
	f.eventually("the new address reaches the other share", func() bool {
		m := f.placedMemberDatabases("orders")
		return m[other] != nil && m[other].Spec.PrimaryEndpoint == "10.1.0.9:5432"
	})
}
