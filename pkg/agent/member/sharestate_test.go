package member

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// forget drops everything the agent remembers of one share, its last report included, and
// nothing of another: a share re-created under the same name starts from nothing.
func TestForgetDropsTheWholeShare(t *testing.T) {
	r := &Reconciler{}
	mdb := &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop.orders", ResourceVersion: "7"}}
	key := shareKey{cluster: "east", NamespacedName: client.ObjectKeyFromObject(mdb)}
	other := shareKey{cluster: "east", NamespacedName: types.NamespacedName{Namespace: "member-east", Name: "shop.carts"}}
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)

	st := r.shares.get(key)
	st.lastPass, st.fenceCounted, st.lapsed, st.unreportedSince = &passRecord{at: now}, 1, 1, now
	st.lease.tried, st.lease.live = leaseTry{epoch: 1, renewed: now}, &liveLease{epoch: 1}
	if r.shares.get(key) != st {
		t.Fatal("a second get gave another record for the same share")
	}
	r.shares.get(other).lapsed = 1
	r.reported.wrote(mdb)

	r.forget(key)
	if st.lease.live != nil {
		t.Error("after forget the renewer may still renew the share's Lease")
	}
	if got := r.shares.get(key); got == st || got.lastPass != nil || got.lapsed != 0 || got.lease.tried != (leaseTry{}) || got.lease.live != nil {
		t.Errorf("after forget the share is remembered as %+v, want nothing", got)
	}
	if r.reported.last.Behind(key.NamespacedName, "6") {
		t.Error("after forget the share's last report is still remembered")
	}
	if r.shares.get(other).lapsed != 1 {
		t.Error("forget dropped another share's record")
	}
}
