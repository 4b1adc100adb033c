package member

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The agent judges a primary Lease it cannot renew lapsed only from renewals it tried itself at
// the share's epoch, and only after that renewal plus the Lease's duration plus the instances'
// clock skew allowance.
func TestJudgeLeaseLapse(t *testing.T) {
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Guard: fence.NewGuard(clocktesting.NewFakeClock(start), 8500*time.Millisecond)}
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	mdb.Spec.Epoch = 3
	share := &shareState{}
	refused := errors.New("connection refused")
	ctx := context.Background()

	if lapsed, wait := r.judgeLeaseLapse(ctx, share, mdb, refused, start.Add(time.Hour)); lapsed || wait != 0 {
		t.Errorf("no renewal tried at the epoch: lapsed %t, wait %s; want neither (an earlier agent may have renewed)", lapsed, wait)
	}
	share.lease.tried = leaseTry{epoch: 2, renewed: start}
	if lapsed, _ := r.judgeLeaseLapse(ctx, share, mdb, refused, start.Add(time.Hour)); lapsed {
		t.Error("a renewal tried at an older epoch counted")
	}
	renewed := start.Add(10 * time.Second)
	share.lease.tried = leaseTry{epoch: 3, renewed: renewed}
	lapse := renewed.Add(8*time.Second + contract.MaxClockSkew) // the Lease lasts whole seconds, rounded down
	if lapsed, wait := r.judgeLeaseLapse(ctx, share, mdb, refused, lapse.Add(-time.Millisecond)); lapsed || wait != time.Millisecond {
		t.Errorf("just before the lapse: lapsed %t, wait %s; want not yet, 1ms", lapsed, wait)
	}
	if lapsed, _ := r.judgeLeaseLapse(ctx, share, mdb, refused, lapse); !lapsed {
		t.Error("at the lapse: not judged lapsed")
	}
	if share.lapsed != 3 {
		t.Errorf("the share records a lapse at epoch %d, want 3", share.lapsed)
	}
}
