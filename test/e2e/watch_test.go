package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/test/framework"
)

// fleetState is one state of a database across the fleet: its DatabaseCluster on the hub and,
// per member, its Pods and primary Lease (share.sts is not followed).
type fleetState struct {
	dbc    *dbfleetv1alpha1.DatabaseCluster
	shares map[string]share
}

// databaseWatch follows one database through informers on the hub and every member and calls
// check after every change any of them delivers, on the state with that change applied. An
// invariant is thus checked in every state the watches pass through, not at sampling instants:
// Ready counts only fall, and primaries only appear, through such changes.
type databaseWatch struct {
	cancel context.CancelFunc

	mu      sync.Mutex
	dbc     *dbfleetv1alpha1.DatabaseCluster
	pods    map[string]map[string]*corev1.Pod // member → name → Pod
	leases  map[string]*coordinationv1.Lease  // member → primary Lease
	check   func(fleetState)                  // nil until every informer has synced
	changes int
}

func (f *federation) watchDatabase(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, check func(fleetState)) *databaseWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &databaseWatch{cancel: cancel, pods: map[string]map[string]*corev1.Pod{}, leases: map[string]*coordinationv1.Lease{}}
	for _, m := range members {
		w.pods[m] = map[string]*corev1.Pod{} // before any informer runs: they read w.pods
	}
	t.Cleanup(func() { w.stop() })
	ns, db := dbc.Namespace, dbc.Name
	synced := w.follow(t, ctx, f.configs["hub"], ns, map[client.Object]func(client.Object, bool){
		&dbfleetv1alpha1.DatabaseCluster{}: func(o client.Object, gone bool) {
			if d := o.(*dbfleetv1alpha1.DatabaseCluster); d.Name == db && !gone {
				w.dbc = d
			}
		},
	})
	for _, m := range members {
		synced = append(synced, w.follow(t, ctx, f.configs[m], ns, map[client.Object]func(client.Object, bool){
			&corev1.Pod{}: func(o client.Object, gone bool) {
				switch p := o.(*corev1.Pod); {
				case p.Labels[dbfleetv1alpha1.LabelDatabase] != db:
				case gone:
					delete(w.pods[m], p.Name)
				default:
					w.pods[m][p.Name] = p
				}
			},
			&coordinationv1.Lease{}: func(o client.Object, gone bool) {
				switch l := o.(*coordinationv1.Lease); {
				case l.Name != contract.PrimaryLeaseName(db):
				case gone:
					delete(w.leases, m)
				default:
					w.leases[m] = l
				}
			},
		})...)
	}
	// Check only once every handler has seen its initial list: a partial fleet is no state.
	await(t, time.Minute, "the watches to sync", func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s.HasSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	w.mu.Lock()
	w.check = check
	w.mu.Unlock()
	return w
}

// follow runs informers on the given kinds in namespace ns of one cluster until the watch stops;
// each kind's apply records a change (gone: deleted) before check sees the new state. It returns
// the handlers' registrations, which tell when each has seen its initial list.
func (w *databaseWatch) follow(t *testing.T, ctx context.Context, cfg *rest.Config, ns string,
	kinds map[client.Object]func(client.Object, bool)) []toolscache.ResourceEventHandlerRegistration {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0 // a watch lasts as long as the test
	c, err := cache.New(cfg, cache.Options{Scheme: framework.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var regs []toolscache.ResourceEventHandlerRegistration
	for kind, apply := range kinds {
		inf, err := c.GetInformer(ctx, kind)
		if err != nil {
			t.Fatal(err)
		}
		on := func(obj any, gone bool) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			apply(o, gone)
			if w.check != nil {
				w.changes++
				w.check(w.state())
			}
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { on(obj, false) },
			UpdateFunc: func(_, obj any) { on(obj, false) },
			DeleteFunc: func(obj any) { on(obj, true) },
		})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	go func() { _ = c.Start(ctx) }()
	return regs
}

// state is the current fleetState; w.mu is held.
func (w *databaseWatch) state() fleetState {
	st := fleetState{dbc: w.dbc, shares: map[string]share{}}
	for _, m := range members {
		s := share{member: m, lease: w.leases[m]}
		for _, p := range w.pods[m] {
			s.pods = append(s.pods, *p)
		}
		st.shares[m] = s
	}
	return st
}

// stop ends the watches and returns how many changes were checked.
func (w *databaseWatch) stop() int {
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.check = nil
	return w.changes
}
