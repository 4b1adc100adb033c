package instance

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// TestSynchronousFailoverUnderWrites fails a synchronous (required) primary over while a client
// writes numbered rows to every instance directly: east-0's Lease stops being renewed and it
// fences; west-1, its synchronous standby, is promoted at epoch 2, synchronous in turn with
// east-0 as its standby, so its commits wait until east-0 has rejoined (pg_rewind) and streams.
// The windows in which the two accepted writes never overlap, every acknowledged row is on the
// new primary, and the old primary converges to the same rows.
func TestSynchronousFailoverUnderWrites(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	createNamespace(ctx, t, "fw-east")
	createNamespace(ctx, t, "fw-west")
	east := newProc(ctx, t, "east-4", "fw-east", "east")
	west := newProc(ctx, t, "west-5", "fw-west", "west")
	// With the failsafe off, east-4 fences at its Lease's deadline though it hears west-5: the
	// failover the hub would make of a real partition (failsafe_test.go has the failsafe).
	east.args = []string{"--failsafe=false"}
	required := contract.FormatSynchronous(contract.DurabilityRequired, 1)
	createPod(ctx, t, "fw-east", east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod)
	annotatePod(ctx, t, "fw-east", east.pod, map[string]string{contract.AnnotationSynchronous: required, contract.AnnotationSynchronousStandbys: west.pod})
	createPod(ctx, t, "fw-west", west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	eastLease := renew(t, "fw-east", decide.Holder("east", 1))

	east.start(t)
	west.start(t)
	east.waitStatus(ctx, t, "primary with a synchronous standby", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Synchronous != nil && len(s.Synchronous.Synchronous) == 1
	})
	execSQL(ctx, t, east, "CREATE TABLE rows (n bigint PRIMARY KEY)")

	w := startMultiWriter(t, east, west)
	w.waitAcks(ctx, t, east.pod, 100)

	eastLease.stop() // east's agent lost the hub
	east.waitStatus(ctx, t, "fenced", func(s contract.Status) bool { return s.Role == contract.RoleFenced })

	// The agent's one patch: role, epoch, endpoint, standbys and synchronous replication together.
	pod := &corev1.Pod{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: "fw-west", Name: west.pod}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[contract.LabelRole] = contract.PodRolePrimary
	pod.Annotations[contract.AnnotationEpoch] = strconv.Itoa(2)
	pod.Annotations[contract.AnnotationPrimaryEndpoint] = west.endpoint()
	pod.Annotations[contract.AnnotationStandbys] = east.pod
	pod.Annotations[contract.AnnotationSynchronous] = required
	pod.Annotations[contract.AnnotationSynchronousStandbys] = east.pod
	if err := member.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	renew(t, "fw-west", decide.Holder("west", 2))
	west.waitStatus(ctx, t, "primary at epoch 2, its commits waiting for east-4", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Epoch == 2 && s.Synchronous != nil && s.Synchronous.Waiting
	})

	setPod(ctx, t, "fw-east", east.pod, contract.PodRoleReplica, 2, west.endpoint(), "")
	st := east.waitStatus(ctx, t, "rejoined and streaming on timeline 2", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.Timeline == 2 && s.Rejoin != nil
	})
	t.Logf("east-4 rejoined: %s (%s)", st.Rejoin.Method, st.Rejoin.Message)
	w.waitAcks(ctx, t, west.pod, 100)
	w.stop()

	wins := w.checkNoOverlap(t, start)
	if len(wins) != 2 || wins[0].pod != east.pod || wins[1].pod != west.pod {
		t.Fatalf("write windows %+v, want east-4's, then west-5's", wins)
	}
	if missing := w.missingOn(ctx, t, west); len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged rows are missing on the new primary (dataDurability required), e.g. %v",
			len(missing), w.total(), missing[:min(len(missing), 10)])
	}
	waitSameRows(ctx, t, west, east)
	if missing := w.missingOn(ctx, t, east); len(missing) > 0 {
		t.Fatalf("%d acknowledged rows are missing on the rejoined old primary, e.g. %v", len(missing), missing[:min(len(missing), 10)])
	}
}
