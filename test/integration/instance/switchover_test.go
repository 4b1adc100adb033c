package instance

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/test/framework"
)

// demote does what the agent does to the old primary's share in the first step of a planned
// switchover: the pod becomes a replica at epoch, with no primary endpoint yet (the hub writes
// none while nobody is primary), and the primary Lease is released. It then waits, as the hub
// does, for the instance to report where its WAL ended, and returns that final LSN.
func demote(ctx context.Context, t *testing.T, p *proc, lease *renewer, epoch int64) string {
	t.Helper()
	setPod(ctx, t, p.namespace, p.pod, contract.PodRoleReplica, epoch, "", "")
	lease.stop()
	if err := fence.ReleasePrimaryLease(ctx, member.Client, p.namespace, database, p.cluster, epoch); err != nil {
		t.Fatal(err)
	}
	st := p.waitStatus(ctx, t, "stopped as primary, with its final LSN", func(s contract.Status) bool {
		return s.Role != contract.RolePrimary && s.Demoted != nil && s.Demoted.Epoch == epoch-1 && s.Demoted.FinalLSN != ""
	})
	t.Logf("%s stopped as primary at epoch %d: final LSN %s on timeline %d", p.pod, st.Demoted.Epoch, st.Demoted.FinalLSN, st.Demoted.Timeline)
	return st.Demoted.FinalLSN
}

// promoteAfter does what the agent does to the new primary's pod in the second step: role
// primary, the new epoch, the standbys and the promotion token in one patch (the primary endpoint
// annotation is left as it was: the agent writes it only on standbys), then the primary Lease.
func promoteAfter(ctx context.Context, t *testing.T, p *proc, epoch int64, lsn, standbys string) *renewer {
	t.Helper()
	pod := &corev1.Pod{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: p.pod}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[contract.LabelRole] = contract.PodRolePrimary
	pod.Annotations[contract.AnnotationEpoch] = strconv.FormatInt(epoch, 10)
	pod.Annotations[contract.AnnotationStandbys] = standbys
	pod.Annotations[contract.AnnotationPromoteAfterLSN] = lsn
	if err := member.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return renew(t, p.namespace, decide.Holder(p.cluster, epoch))
}

// TestSwitchoverUnderWrites switches the primary from east-6 to west-7 as the hub does, while a
// client writes numbered rows to both instances directly, as fast as they answer: east-6 is
// demoted (replica at epoch 2, its Lease released) and stops with a shutdown checkpoint, whose
// location it reports as its final LSN; west-7 is handed role primary at epoch 2 with that LSN,
// replays past it and promotes; east-6 is handed west-7 as its primary and follows it. Every
// acknowledged row is on west-7, the windows in which the two accepted writes do not overlap,
// west-7 is primary at epoch 2 on timeline 2, and east-6 rejoins with nothing to rewind (it wrote
// nothing west-7 lacks) and converges to the same rows. The write gap is logged.
func TestSwitchoverUnderWrites(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	createNamespace(ctx, t, "sw-east")
	createNamespace(ctx, t, "sw-west")
	east := newProc(ctx, t, "east-6", "sw-east", "east")
	west := newProc(ctx, t, "west-7", "sw-west", "west")
	createPod(ctx, t, "sw-east", east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod)
	createPod(ctx, t, "sw-west", west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	eastLease := renew(t, "sw-east", decide.Holder("east", 1))

	east.start(t)
	east.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, east, "CREATE TABLE rows (n bigint PRIMARY KEY)")
	west.start(t)
	west.waitStatus(ctx, t, "streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })

	w := startMultiWriter(t, east, west)
	w.waitAcks(ctx, t, east.pod, 200)

	final := demote(ctx, t, east, eastLease, 2)
	promoteAfter(ctx, t, west, 2, final, east.pod)
	promoted := west.waitStatus(ctx, t, "primary at epoch 2 on timeline 2", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Epoch == 2 && s.PromotedEpoch == 2 && s.Timeline == 2
	})
	finalLSN, _ := contract.ParseLSN(final)
	if at, err := contract.ParseLSN(promoted.ReceivedLSN); err != nil || at <= finalLSN {
		t.Errorf("the new primary writes at %s (%v), not past the old primary's final LSN %s", promoted.ReceivedLSN, err, final)
	}

	setPod(ctx, t, "sw-east", east.pod, contract.PodRoleReplica, 2, west.endpoint(), "")
	st := east.waitStatus(ctx, t, "rejoined and streaming on timeline 2", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.Timeline == 2 && s.Rejoin != nil
	})
	if st.Rejoin.Method != contract.RejoinNoRewindNeeded {
		t.Errorf("the old primary rejoined by %s (%s), want %s: after a switchover it holds nothing the new primary lacks",
			st.Rejoin.Method, st.Rejoin.Message, contract.RejoinNoRewindNeeded)
	}
	w.waitAcks(ctx, t, west.pod, 200)
	w.stop()

	wins := w.checkNoOverlap(t, start)
	if len(wins) != 2 || wins[0].pod != east.pod || wins[1].pod != west.pod {
		t.Fatalf("write windows %+v, want east-6's, then west-7's", wins)
	}
	t.Logf("write gap seen by the writer: %s (east-6's last acknowledged write to west-7's first)", wins[1].from.Sub(wins[0].to).Round(time.Millisecond))
	if missing := w.missingOn(ctx, t, west); len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged rows are missing on the new primary after a switchover, e.g. %v",
			len(missing), w.total(), missing[:min(len(missing), 10)])
	}
	waitSameRows(ctx, t, west, east)
	if missing := w.missingOn(ctx, t, east); len(missing) > 0 {
		t.Fatalf("%d acknowledged rows are missing on the rejoined old primary, e.g. %v", len(missing), missing[:min(len(missing), 10)])
	}
}

// TestSwitchoverTargetWithoutTheFinalWALDoesNotPromote: the target of a switchover that has not
// received the old primary's last WAL (its replication link was cut before the demotion, and the
// old primary acknowledged rows after that) is handed role primary at epoch 2 with the old
// primary's final LSN. It stays a standby that takes no write and says it waits to replay past
// that LSN: promoted, it would lose those rows. Handed back as the hub does after
// SwitchoverReplayTimeout (the target a replica at epoch 3, the old primary primary at 3 with the
// same LSN), the old primary promotes past its own final LSN and takes writes, and the target
// follows it with every row.
func TestSwitchoverTargetWithoutTheFinalWALDoesNotPromote(t *testing.T) {
	ctx := context.Background()
	createNamespace(ctx, t, "swl-east")
	createNamespace(ctx, t, "swl-west")
	east := newProc(ctx, t, "east-8", "swl-east", "east")
	west := newProc(ctx, t, "west-9", "swl-west", "west")
	link, err := framework.StartProxy(east.endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	createPod(ctx, t, "swl-east", east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod)
	createPod(ctx, t, "swl-west", west.pod, contract.PodRoleReplica, 1, link.Addr(), "")
	eastLease := renew(t, "swl-east", decide.Holder("east", 1))

	east.start(t)
	east.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, east, "CREATE TABLE rows (n int PRIMARY KEY)", "INSERT INTO rows SELECT generate_series(1, 100)")
	west.start(t)
	west.waitStatus(ctx, t, "streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
	waitRows(ctx, t, west, 100)

	link.Partition()
	west.waitStatus(ctx, t, "not streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && !s.Streaming })
	execSQL(ctx, t, east, "INSERT INTO rows SELECT generate_series(101, 200)") // acknowledged by east alone

	final := demote(ctx, t, east, eastLease, 2)
	westLease := promoteAfter(ctx, t, west, 2, final, east.pod)
	st := west.waitStatus(ctx, t, "waiting to replay past the old primary's final LSN", func(s contract.Status) bool {
		return s.Epoch == 2 && s.Reason == contract.ReasonWaitingForReplay && strings.Contains(s.Message, final)
	})
	if st.Role != contract.RoleStandby || st.PromotedEpoch == 2 {
		t.Fatalf("the target is %s (promoted at epoch %d) without the old primary's last WAL; want a standby", st.Role, st.PromotedEpoch)
	}
	t.Logf("%s: %s (replayed %s)", west.pod, st.Message, st.ReplayedLSN)
	conn, err := west.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO rows VALUES (1000)"); err == nil {
		t.Fatal("the waiting target accepted a write")
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Fatalf("the target has %d rows, want the 100 it received before its link was cut", n)
	}

	// What the hub does after SwitchoverReplayTimeout: the waiting target is demoted at epoch 3
	// (its instance must say it acts on 3 and never promoted at 2: the hub's proof that it took
	// no write), and the old primary is handed the primary back at 3 with the same final LSN,
	// which its own WAL ends at.
	setPod(ctx, t, "swl-west", west.pod, contract.PodRoleReplica, 3, "", "")
	westLease.stop()
	if err := fence.ReleasePrimaryLease(ctx, member.Client, "swl-west", database, "west", 3); err != nil {
		t.Fatal(err)
	}
	west.waitStatus(ctx, t, "acting on epoch 3, never promoted at 2", func(s contract.Status) bool {
		return s.Epoch == 3 && s.Role != contract.RolePrimary && s.PromotedEpoch < 2
	})
	promoteAfter(ctx, t, east, 3, final, west.pod)
	back := east.waitStatus(ctx, t, "primary again at epoch 3", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Epoch == 3 && s.PromotedEpoch == 3
	})
	t.Logf("%s primary again at epoch 3 on timeline %d after replaying past its own final LSN %s", east.pod, back.Timeline, final)
	execSQL(ctx, t, east, "INSERT INTO rows VALUES (201)")
	waitRows(ctx, t, east, 201)

	// The target follows it and gets every row, the 100 it missed included.
	link.Heal()
	setPod(ctx, t, "swl-west", west.pod, contract.PodRoleReplica, 3, link.Addr(), "")
	west.waitStatus(ctx, t, "streaming from the primary at epoch 3", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.Epoch == 3
	})
	waitRows(ctx, t, west, 201)
}
