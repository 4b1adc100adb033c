package observe

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// Snapshot is the last answer for each object.
type Snapshot struct {
	Pod      decide.Pod
	Standbys []string
	// Synchronous is what the pod asks of a primary's synchronous replication.
	Synchronous decide.Synchronous
	Lease       decide.Lease
	// LeaseRead is when the Lease (or its absence) was last read; zero before the first read.
	LeaseRead time.Time
	// Err is the last read error, cleared by the next successful read.
	Err error
}

// Observer polls the Pod and the Lease, and watches them to read them again as soon as either
// changes.
type Observer struct {
	Client    kubernetes.Interface
	Namespace string
	Pod       string
	Lease     string
	Interval  time.Duration

	mu      sync.Mutex
	snap    Snapshot
	changed chan struct{}
}

// watchRetry is how long a watch that failed waits before it is opened again; polling goes on
// meanwhile, so a watch the instance's Role does not allow costs one request per watchRetry.
const watchRetry = 30 * time.Second

// Changed is signalled (without blocking) after each read that changed the snapshot.
func (o *Observer) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.changed == nil {
		o.changed = make(chan struct{}, 1)
	}
	return o.changed
}

// Snapshot returns the last answers.
func (o *Observer) Snapshot() Snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.snap
	s.Standbys = append([]string(nil), o.snap.Standbys...)
	s.Synchronous.Standbys = append([]string(nil), o.snap.Synchronous.Standbys...)
	return s
}

// Run polls until ctx ends. A change to the Pod or the Lease, seen through a watch, brings the
// next read forward: a promotion or a new primary endpoint is acted on within the watch's
// delivery time rather than up to Interval later (a planned switchover waits on two such reads,
// the epoch on the target's pod and the target's new Lease). The polls stay: they are what the
// Lease judgement rests on when no event comes, and all there is when a watch is refused.
func (o *Observer) Run(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	_ = o.Changed()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	poke := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() {
		defer wg.Done()
		o.watchNamed(ctx, "pod", o.Pod, poke, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return o.Client.CoreV1().Pods(o.Namespace).Watch(ctx, opts)
		})
	}()
	go func() {
		defer wg.Done()
		o.watchNamed(ctx, "lease", o.Lease, poke, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return o.Client.CoordinationV1().Leases(o.Namespace).Watch(ctx, opts)
		})
	}()
	var lastErr string
	for {
		err := o.read(ctx)
		switch {
		case err != nil && ctx.Err() == nil && err.Error() != lastErr:
			log.Info("Reading the Pod or the primary Lease failed; keeping what was last read", "err", err.Error())
			lastErr = err.Error()
		case err == nil && lastErr != "":
			log.Info("Reading the Pod and the primary Lease again")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-poke:
		}
	}
}

// watchNamed watches the one object called name (a field selector on metadata.name, which RBAC
// authorises as a request for that name) and pokes on every event, until ctx ends. A watch that
// fails or ends is opened again, after watchRetry when it failed at once.
func (o *Observer) watchNamed(ctx context.Context, kind, name string, poke chan<- struct{},
	open func(context.Context, metav1.ListOptions) (watch.Interface, error)) {
	log := logr.FromContextOrDiscard(ctx)
	refused := ""
	for ctx.Err() == nil {
		opened := time.Now()
		w, err := open(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err == nil {
			if refused != "" {
				log.Info("Watching again", "kind", kind, "name", name)
				refused = ""
			}
			for range w.ResultChan() {
				select {
				case poke <- struct{}{}:
				default:
				}
			}
			w.Stop()
		} else if ctx.Err() == nil && err.Error() != refused {
			log.Info("Cannot watch; reading by polling alone", "kind", kind, "name", name, "err", err.Error())
			refused = err.Error()
		}
		if err != nil || time.Since(opened) < time.Second {
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}
}

// Refresh reads the Pod and the Lease now, before a decision that must not rest on a poll that
// is late: the guard's, at a deadline.
func (o *Observer) Refresh(ctx context.Context) error { return o.read(ctx) }

func (o *Observer) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.Interval*5)
	defer cancel()
	var errs []string
	pod, standbys, sync, podErr := o.readPod(ctx)
	if podErr != nil {
		errs = append(errs, podErr.Error())
	}
	lease, leaseErr := o.readLease(ctx)
	read := time.Now()
	if leaseErr != nil {
		errs = append(errs, leaseErr.Error())
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	before := o.snap
	if podErr == nil {
		o.snap.Pod, o.snap.Standbys, o.snap.Synchronous = pod, standbys, sync
	}
	if leaseErr == nil {
		o.snap.Lease, o.snap.LeaseRead = lease, read
	}
	o.snap.Err = nil
	if len(errs) > 0 {
		o.snap.Err = fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if before.Pod != o.snap.Pod || before.Lease != o.snap.Lease || strings.Join(before.Standbys, ",") != strings.Join(o.snap.Standbys, ",") ||
		!before.Synchronous.Equal(o.snap.Synchronous) {
		select {
		case o.changed <- struct{}{}:
		default:
		}
	}
	return o.snap.Err
}

func (o *Observer) readPod(ctx context.Context) (decide.Pod, []string, decide.Synchronous, error) {
	p, err := o.Client.CoreV1().Pods(o.Namespace).Get(ctx, o.Pod, metav1.GetOptions{})
	if err != nil {
		return decide.Pod{}, nil, decide.Synchronous{}, fmt.Errorf("read pod %s/%s: %w", o.Namespace, o.Pod, err)
	}
	pod := decide.Pod{Known: true, Role: p.Labels[contract.LabelRole], Epoch: contract.ParseEpoch(p.Annotations[contract.AnnotationEpoch]),
		PrimaryEndpoint: strings.TrimSpace(p.Annotations[contract.AnnotationPrimaryEndpoint]),
		PromoteAfterLSN: strings.TrimSpace(p.Annotations[contract.AnnotationPromoteAfterLSN])}
	sync := decide.Synchronous{}
	if durability, number := contract.ParseSynchronous(p.Annotations[contract.AnnotationSynchronous]); number > 0 {
		sync = decide.Synchronous{Durability: durability, Number: number, Standbys: contract.ParseNames(p.Annotations[contract.AnnotationSynchronousStandbys])}
	}
	return pod, contract.ParseNames(p.Annotations[contract.AnnotationStandbys]), sync, nil
}

func (o *Observer) readLease(ctx context.Context) (decide.Lease, error) {
	l, err := o.Client.CoordinationV1().Leases(o.Namespace).Get(ctx, o.Lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return decide.Lease{}, nil
	}
	if err != nil {
		return decide.Lease{}, fmt.Errorf("read lease %s/%s: %w", o.Namespace, o.Lease, err)
	}
	out := decide.Lease{Exists: true}
	if l.Spec.HolderIdentity != nil {
		out.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		out.RenewTime = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		out.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return out, nil
}
