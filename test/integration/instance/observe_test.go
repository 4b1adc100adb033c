package instance

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/observe"
)

// The observer sees a change to its Pod and to the primary Lease through its watches, with only
// the Role the agent grants (get and watch by name): its poll interval here is an hour, so only
// a watch event can bring either change into the snapshot. A switchover's target waits on both.
func TestObserverWatchesPodAndLease(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, pod, user := "observe-watch", "pg-0", "instance-observe-watch"
	createNamespace(ctx, t, ns)
	createPod(ctx, t, ns, pod, "replica", 1, "10.0.0.1:5432", "")
	grantReadOnly(ctx, t, ns, pod, user)
	kc, err := member.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	o := &observe.Observer{Client: kubernetes.NewForConfigOrDie(cfg), Namespace: ns, Pod: pod,
		Lease: contract.PrimaryLeaseName(database), Interval: time.Hour}
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	defer func() { cancel(); <-done }()

	awaitSnapshot := func(what string, cond func(observe.Snapshot) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			s := o.Snapshot()
			if cond(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within a minute; last snapshot %+v", what, s)
			}
			select {
			case <-o.Changed():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	awaitSnapshot("the first read", func(s observe.Snapshot) bool { return s.Pod.Known && s.Pod.Epoch == 1 && s.Err == nil })

	setPod(ctx, t, ns, pod, "primary", 2, "10.0.0.2:5432", "")
	awaitSnapshot("the pod's new epoch and endpoint", func(s observe.Snapshot) bool {
		return s.Pod.Epoch == 2 && s.Pod.Role == "primary" && s.Pod.PrimaryEndpoint == "10.0.0.2:5432"
	})

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: contract.PrimaryLeaseName(database)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("east/2"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if err := member.Client.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	awaitSnapshot("the new primary Lease", func(s observe.Snapshot) bool { return s.Lease.Exists && s.Lease.Holder == "east/2" })
}
