package member

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// passResult is what one full pass did to a share's objects in the member cluster.
type passResult struct {
	// sts is the StatefulSet as the API server has it; nil when it could not be read or applied.
	sts *appsv1.StatefulSet
	// errs are the objects that failed. Each object is applied on its own: one that fails never
	// keeps the others, above all the primary Lease, from being written.
	errs []error
	// atEpoch says the share acts at its epoch: the StatefulSet carries it (and the fenced
	// epoch), the pods carry their roles, and the primary Lease is renewed, or released on
	// demotion. Only then does the agent report the epoch, which the hub waits for before it
	// promotes another cluster.
	atEpoch bool
	// storage says why the volumes keep a size other than the share asks for; nil when they
	// have it (or are being given it).
	storage *storageKept
	// replacing says the StatefulSet is being replaced to grow its volume claim template: the
	// old one is going (its pods stay) and the next pass creates the new one.
	replacing bool
	// instanceManaged says the share's pods run the instance manager (postgres with
	// --instance-image), and instances is what their /status said.
	instanceManaged bool
	instances       []dbfleetv1alpha1.InstanceStatus
	// instanceFencedAt is the highest epoch at which an instance of the share says it fenced
	// itself (0: none).
	instanceFencedAt int64
	// clocks is what the instances' clocks said against the agent's (shareClocks): measured
	// is false when none was read.
	clocks struct {
		measured, skewed bool
		message          string
	}
	// leaseErr is why the primary Lease could not be renewed (nil: renewed, or not a live
	// primary).
	leaseErr error
	// primaryLost says the share's primary pod was counted lost (watchPrimary): its Lease is
	// renewed no more; lostWhy says why it was.
	primaryLost bool
	lostWhy     string
	// fenceReason and fenceMessage, when set, say why the share is fenced when it is not for its
	// hub lease: its primary Lease lapsed (PrimaryLeaseLapsed, judgeLeaseLapse) or its primary
	// was lost (PrimaryLost, watchPrimary).
	fenceReason, fenceMessage string
	// imageProblems are the share's containers that cannot get their image (imageProblems).
	imageProblems []string
	// endpoints are the share's addresses as other clusters reach them (shareEndpoints).
	endpoints *dbfleetv1alpha1.DatabaseEndpoints
}

// err is every failure of the pass.
func (p *passResult) err() error { return errors.Join(p.errs...) }

// applyShare writes a share into the member cluster, each object on its own: the namespace, the
// Service, the StatefulSet (growing its volumes when asked), the PDBs, the pods' role labels and
// the primary Lease (renewed while the share is a live primary, released once it is demoted).
// Objects the agent did not create are never touched.
// live reads the member API server directly, for what the agent reads rarely and may not be
// allowed to (an agent installed before it needed StorageClasses): a cached read would wait for
// an informer that cannot start, and hold up every other share. hub reads the hub's
// MemberDatabases (the renewer checks the share's role and epoch there between passes).
func (r *Reconciler) applyShare(ctx context.Context, hub client.Reader, member client.Client, live client.Reader, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, fencedAt int64, cluster string) passResult {
	p := passResult{atEpoch: true}
	fail := func(epoch bool, err error) {
		if err == nil {
			return
		}
		p.errs = append(p.errs, err)
		if epoch {
			p.atEpoch = false
		}
	}
	primary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary
	fenced := primary && fencedAt > 0

	fail(true, ensureNamespace(ctx, member, mdb.Spec.DatabaseRef.Namespace))
	fail(false, applyOwned(ctx, member, specs.HeadlessService(mdb), &corev1.Service{}))
	var err error
	p.sts, p.storage, p.replacing, err = r.applyStatefulSet(ctx, member, live, mdb, fencedAt, cluster)
	fail(true, err)
	for _, pdb := range specs.PDBs(mdb) {
		fail(false, applyOwned(ctx, member, pdb, &policyv1.PodDisruptionBudget{}))
	}
	if !primary {
		// A demoted share keeps no primary budget.
		fail(false, deleteOwned(ctx, member, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{
			Namespace: mdb.Spec.DatabaseRef.Namespace, Name: specs.PrimaryPDBName(mdb.Spec.DatabaseRef.Name)}}))
	}
	p.imageProblems, err = labelPods(ctx, member, mdb, fenced)
	fail(true, err)
	if r.instanceManaged(mdb) {
		fail(true, annotateInstancePods(ctx, member, mdb))
		p.instanceManaged = true
		var reports []instanceReport
		reports, err = r.observeInstances(ctx, member, mdb)
		p.instances, p.instanceFencedAt = statuses(reports), highestFencedEpoch(reports)
		p.clocks.measured, p.clocks.skewed, p.clocks.message = shareClocks(reports)
		if primary && !fenced && r.Guard != nil && err == nil {
			p.primaryLost = r.watchPrimary(ctx, mdb, share, readPrimary(mdb, reports))
		}
		// Once lost, lost at this epoch: a pass that could not read the instances renews
		// nothing either.
		p.primaryLost = p.primaryLost || (primary && share.primary.lostAt(mdb.Spec.Epoch))
		if p.primaryLost {
			p.lostWhy = share.primary.why
		}
		fail(false, err)
		p.endpoints, err = shareEndpoints(ctx, member, mdb, p.instances)
		fail(false, err)
	}
	switch {
	case primary && !fenced && r.Guard != nil && p.primaryLost:
		// Lost: the Lease runs out unrenewed, and the share is fenced then (settleFence).
	case primary && !fenced && r.Guard != nil && share.primary.holding(mdb.Spec.Epoch):
		// Down, not lost yet: no renewal (the renewer's neither) until it serves again.
		share.lease.stop()
	case primary && !fenced && r.Guard != nil:
		p.leaseErr = r.renewPrimaryLease(ctx, hub, member, mdb, share, cluster)
		fail(true, p.leaseErr)
	case !primary:
		// Demoted: give up the primary Lease before reporting the new epoch, which is what the
		// hub waits for before it promotes another cluster.
		fail(true, fence.ReleasePrimaryLease(ctx, member, mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name, cluster, mdb.Spec.Epoch))
	}
	// Last, because it reads the hub: the pod roles and the primary Lease above must never wait
	// on a hub the agent may have lost (a fenced primary's label would wait for the partition
	// to heal).
	if mdb.Spec.Database.Engine == dbfleetv1alpha1.EnginePostgres {
		for _, err := range r.applyPostgres(ctx, member, live, mdb) {
			fail(false, err)
		}
	}
	return p
}

// applyStatefulSet applies the share's StatefulSet. A StatefulSet's volume claim template cannot
// be changed, so when the share's storage grows the agent first expands the existing claims (if
// their StorageClass allows it), then deletes the StatefulSet leaving its pods and claims in
// place (propagation Orphan) and creates it again with the larger template once it is gone; the
// new StatefulSet adopts the running pods. It returns the StatefulSet as the API server has it,
// why the volumes keep another size (nil when they do not), and whether it is being replaced.
func (r *Reconciler) applyStatefulSet(ctx context.Context, member client.Client, live client.Reader, mdb *dbfleetv1alpha1.MemberDatabase, fencedAt int64, cluster string) (*appsv1.StatefulSet, *storageKept, bool, error) {
	desired := specs.StatefulSet(mdb, fencedAt)
	if r.instanceManaged(mdb) {
		specs.WithInstanceManager(desired, mdb, r.InstanceImage, cluster)
	}
	key := client.ObjectKeyFromObject(desired)
	existing := &appsv1.StatefulSet{}
	err := member.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return nil, nil, false, fmt.Errorf("read StatefulSet %s: %w", key, err)
	case existing.Labels[specs.LabelManagedBy] != specs.ManagedByAgent:
		return nil, nil, false, &conflictError{kind: "StatefulSet", key: key.String()}
	case !existing.DeletionTimestamp.IsZero():
		// Going (replaced by an earlier pass, or deleted by someone): its pods stay, and the
		// pass after it is gone creates it again.
		return existing, nil, true, nil
	}
	var kept *storageKept
	if existing != nil {
		var replace bool
		replace, kept, err = r.growStorage(ctx, member, live, mdb, existing, desired, fencedAt > 0)
		if err != nil {
			return existing, kept, false, err
		}
		if replace {
			return existing, nil, true, r.replaceStatefulSet(ctx, member, mdb, existing, desired)
		}
	}
	if err := applyOwned(ctx, member, desired, &appsv1.StatefulSet{}); err != nil {
		return existing, kept, false, err
	}
	return desired, kept, false, nil
}

// applyOwned applies desired unless an object of that name exists without the agent's label.
// existing is an empty object of the same type, used to look.
func applyOwned(ctx context.Context, member client.Client, desired, existing client.Object) error {
	key := client.ObjectKeyFromObject(desired)
	kind := desired.GetObjectKind().GroupVersionKind().Kind
	err := member.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read %s %s: %w", kind, key, err)
	case existing.GetLabels()[specs.LabelManagedBy] != specs.ManagedByAgent:
		return &conflictError{kind: kind, key: key.String()}
	}
	//nolint:staticcheck // typed server-side apply; the object carries only the fields we own.
	if err := member.Patch(ctx, desired, client.Apply, FieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	return nil
}

// applyOwnedSecret is applyOwned for a Secret, which the member's cache holds only when the
// agent wrote it (MemberCache): one it does not hold is looked up on the API server, so that a
// Secret of the same name that is not the agent's is reported, never written over.
func applyOwnedSecret(ctx context.Context, member client.Client, live client.Reader, desired *corev1.Secret) error {
	key := client.ObjectKeyFromObject(desired)
	err := member.Get(ctx, key, &corev1.Secret{})
	if apierrors.IsNotFound(err) {
		existing := &corev1.Secret{}
		switch err := live.Get(ctx, key, existing); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read Secret %s: %w", key, err)
		case existing.Labels[specs.LabelManagedBy] != specs.ManagedByAgent:
			return &conflictError{kind: "Secret", key: key.String()}
		}
	}
	return applyOwned(ctx, member, desired, &corev1.Secret{})
}

// deleteOwned deletes obj if it exists and carries the agent's label.
func deleteOwned(ctx context.Context, member client.Client, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	if err := member.Get(ctx, key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if obj.GetLabels()[specs.LabelManagedBy] != specs.ManagedByAgent {
		return nil // not ours: leave it
	}
	if err := member.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %T %s: %w", obj, key, err)
	}
	return nil
}

func ensureNamespace(ctx context.Context, member client.Client, name string) error {
	ns := &corev1.Namespace{}
	err := member.Get(ctx, types.NamespacedName{Name: name}, ns)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read namespace %s: %w", name, err)
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{specs.LabelManagedBy: specs.ManagedByAgent}}}
	if err := member.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// labelPods sets dbfleet.io/role on each pod of the share: primary for the primary cluster's
// share's primary pod (specs.PrimaryOrdinal; fenced once fenced), replica otherwise. It returns
// the image problems of the pods it read (imageProblems).
func labelPods(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, fenced bool) ([]string, error) {
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods, client.InNamespace(mdb.Spec.DatabaseRef.Namespace), client.MatchingLabels(specs.SelectorLabels(mdb))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	problems := imageProblems(pods.Items)
	for i := range pods.Items {
		pod := &pods.Items[i]
		role, err := specs.PodRole(mdb, pod.Name, fenced)
		if err != nil {
			continue // not one of the StatefulSet's pods
		}
		if pod.Labels[contract.LabelRole] == role {
			continue
		}
		patched := pod.DeepCopy()
		if patched.Labels == nil {
			patched.Labels = map[string]string{}
		}
		patched.Labels[contract.LabelRole] = role
		if err := member.Patch(ctx, patched, client.MergeFrom(pod)); client.IgnoreNotFound(err) != nil {
			return problems, fmt.Errorf("label pod %s: %w", pod.Name, err)
		}
	}
	return problems, nil
}

// applyPostgres writes what a postgres share needs besides its StatefulSet: the client Services,
// the instance managers' ServiceAccount and Role, and the credentials the hub carried into
// member-<cluster>, as "<db>-superuser", "<db>-replication", "<db>-app" and "<db>-tls".
func (r *Reconciler) applyPostgres(ctx context.Context, member client.Client, live client.Reader, mdb *dbfleetv1alpha1.MemberDatabase) []error {
	var errs []error
	for _, svc := range specs.RoleServices(mdb, r.InstanceImage != "") {
		errs = append(errs, applyOwned(ctx, member, svc, &corev1.Service{}))
	}
	sa, role, binding := specs.InstanceRBAC(mdb)
	errs = append(errs,
		applyOwned(ctx, member, sa, &corev1.ServiceAccount{}),
		applyOwned(ctx, member, role, &rbacv1.Role{}),
		applyOwned(ctx, member, binding, &rbacv1.RoleBinding{}))
	carried, err := r.carriedCredentials(ctx, mdb)
	if err != nil {
		return append(errs, err)
	}
	for _, secret := range specs.Credentials(mdb, carried) {
		errs = append(errs, applyOwnedSecret(ctx, member, live, secret))
	}
	return errs
}

// carriedCredentialsTimeout bounds the read of the carried credentials from the hub.
const carriedCredentialsTimeout = 3 * time.Second

// carriedCredentials reads the share's credentials from member-<cluster> on the hub. It reads
// the API server, not a cache: a Secret informer on the hub would not start for an agent whose
// hub Role predates the grant, and would hold up every share.
func (r *Reconciler) carriedCredentials(ctx context.Context, mdb *dbfleetv1alpha1.MemberDatabase) ([]corev1.Secret, error) {
	// Bounded, so that a lost hub holds up this worker's other shares for seconds at most.
	ctx, cancel := context.WithTimeout(ctx, carriedCredentialsTimeout)
	defer cancel()
	list := &corev1.SecretList{}
	if err := r.Manager.GetLocalManager().GetAPIReader().List(ctx, list, client.InNamespace(mdb.Namespace), client.MatchingLabels{
		dbfleetv1alpha1.LabelDatabase: mdb.Spec.DatabaseRef.Name, dbfleetv1alpha1.LabelDatabaseNamespace: mdb.Spec.DatabaseRef.Namespace,
	}, client.HasLabels{dbfleetv1alpha1.LabelCredentials}); err != nil {
		return nil, fmt.Errorf("read the credentials carried to %s: %w", mdb.Namespace, err)
	}
	return list.Items, nil
}
