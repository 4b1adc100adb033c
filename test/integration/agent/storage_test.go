package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/pkg/specs"
	"github.com/dbfleet/dbfleet/test/framework"
)

// agentMemberConfig is a member user with exactly the rights hub join grants the agent, changed
// by adjust: the agent of these tests meets the member's RBAC as a real agent does.
func agentMemberConfig(t *testing.T, user string, adjust func([]rbacv1.PolicyRule) []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := context.Background()
	rules := join.AgentMemberRules()
	if adjust != nil {
		rules = adjust(rules)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := east.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := east.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// agentServiceAccount is the user name of the agent's ServiceAccount in a member, which join's
// admission policy holds to dbfleet's objects.
const agentServiceAccount = "system:serviceaccount:dbfleet-system:dbfleet-agent"

// installAgentAdmissionPolicy applies join's admission policy to the member (once per run) and
// waits until it refuses what it should of asAgent's writes.
func installAgentAdmissionPolicy(t *testing.T, asAgent *rest.Config) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range join.AgentAdmissionPolicy(nil) {
		if err := east.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(asAgent, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "probe",
		Labels: map[string]string{specs.LabelManagedBy: specs.ManagedByAgent}}}
	err = framework.WaitFor(ctx, framework.DefaultTimeout, "the agent's admission policy in force", func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(c.Create(ctx, probe, client.DryRunAll)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func storageClass(t *testing.T, name string, expandable bool) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/disk"}
	if expandable {
		sc.AllowVolumeExpansion = ptr.To(true)
	}
	if err := east.Client.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
}

func withStorage(size, class string) func(*dbfleetv1alpha1.MemberDatabase) {
	return func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Database.Storage.Size = resource.MustParse(size)
		m.Spec.Database.Storage.StorageClassName = ptr.To(class)
	}
}

// runPods creates the share's pods and their bound claims as the member's StatefulSet
// controller and volume provisioner would (the member API server runs no controllers): each pod
// owned by the StatefulSet, each claim data-<pod> from its claim template.
func (s *share) runPods(sts *appsv1.StatefulSet, ordinals ...int) (podUIDs map[string]types.UID) {
	s.t.Helper()
	podUIDs = map[string]types.UID{}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	for _, o := range ordinals {
		name := fmt.Sprintf("%s-%d", s.db, o)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: sts.Spec.Template.Labels, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "database", Image: "postgres:16.4"}}},
		}
		if err := east.Client.Create(s.ctx, pod); err != nil {
			s.t.Fatal(err)
		}
		podUIDs[name] = pod.UID
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: tmpl.Name + "-" + name, Labels: tmpl.Labels},
			Spec:       tmpl.Spec,
		}
		if err := east.Client.Create(s.ctx, pvc); err != nil {
			s.t.Fatal(err)
		}
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: tmpl.Spec.AccessModes,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: tmpl.Spec.Resources.Requests[corev1.ResourceStorage]}}
		if err := east.Client.Status().Update(s.ctx, pvc); err != nil {
			s.t.Fatal(err)
		}
	}
	return podUIDs
}

func (s *share) claimSizes(ordinals ...int) []string {
	var sizes []string
	for _, o := range ordinals {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := east.Client.Get(s.ctx, s.key(fmt.Sprintf("data-%s-%d", s.db, o)), pvc); err != nil {
			sizes = append(sizes, "error: "+err.Error())
			continue
		}
		sizes = append(sizes, pvc.Spec.Resources.Requests.Storage().String())
	}
	return sizes
}

func templateSize(sts *appsv1.StatefulSet) string {
	return sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()
}

func appliedReason(m *dbfleetv1alpha1.MemberDatabase) string {
	c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
	if c == nil || c.ObservedGeneration != m.Generation {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// actAsGarbageCollector does what the member's garbage collector does for a StatefulSet deleted
// with propagation Orphan: it drops the owner references to it from its pods, then its orphan
// finalizer, which lets it go.
func (s *share) actAsGarbageCollector(sts *appsv1.StatefulSet) {
	s.t.Helper()
	pods := &corev1.PodList{}
	if err := east.Client.List(s.ctx, pods, client.InNamespace(s.ns)); err != nil {
		s.t.Fatal(err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		patched := pod.DeepCopy()
		patched.OwnerReferences = slices.DeleteFunc(patched.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == sts.UID })
		if err := east.Client.Patch(s.ctx, patched, client.MergeFrom(pod)); err != nil {
			s.t.Fatal(err)
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.StatefulSet{}
		if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(sts), cur); err != nil {
			return err
		}
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
		return east.Client.Update(s.ctx, cur)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// Growing a share's storage expands its bound claims and replaces the StatefulSet (whose claim
// template is immutable) without touching its pods; the share stays Applied throughout.
func TestStorageGrowsWithoutTouchingThePods(t *testing.T) {
	storageClass(t, "expandable", true)
	startAgent(t, hub.Config, agentMemberConfig(t, "agent-storage", nil))
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary, withStorage("1Gi", "expandable"))
	old := s.waitSTS("StatefulSet", func(sts *appsv1.StatefulSet) bool { return templateSize(sts) == "1Gi" })
	pods := s.runPods(old, 0, 1)
	s.waitMDB("Applied at 1Gi", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "True/"+dbfleetv1alpha1.ReasonApplied
	})

	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Database.Storage.Size = resource.MustParse("2Gi") })
	s.eventually("claims expanded to 2Gi", func() bool { return slices.Equal(s.claimSizes(0, 1), []string{"2Gi", "2Gi"}) })
	// Deleted with propagation Orphan: the API server keeps it, with the orphan finalizer, until
	// the garbage collector has released its pods.
	going := s.waitSTS("old StatefulSet deleted, orphaning its pods", func(sts *appsv1.StatefulSet) bool {
		return sts.UID == old.UID && !sts.DeletionTimestamp.IsZero() && slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents)
	})
	s.waitMDB("Applied while the StatefulSet is replaced", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "True/"+dbfleetv1alpha1.ReasonReplacingStatefulSet && m.Status.Epoch == 1
	})

	s.actAsGarbageCollector(going)
	grown := s.waitSTS("StatefulSet created again with a 2Gi claim template", func(sts *appsv1.StatefulSet) bool {
		return sts.UID != old.UID && sts.DeletionTimestamp.IsZero() && templateSize(sts) == "2Gi"
	})
	if grown.Labels[dbfleetv1alpha1.LabelEpoch] != "1" || *grown.Spec.Replicas != 2 || grown.Spec.Template.Spec.Containers[0].Image != "postgres:16.4" {
		t.Errorf("the new StatefulSet is not the share's: labels %v, replicas %d", grown.Labels, *grown.Spec.Replicas)
	}
	for name, uid := range pods {
		pod := &corev1.Pod{}
		if err := east.Client.Get(s.ctx, s.key(name), pod); err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if pod.UID != uid || !pod.DeletionTimestamp.IsZero() {
			t.Errorf("pod %s was replaced or is being deleted (UID %s, was %s)", name, pod.UID, uid)
		}
	}
	s.waitMDB("Applied at 2Gi", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "True/"+dbfleetv1alpha1.ReasonApplied && condition(m, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse)
	})
	if got := s.claimSizes(0, 1); !slices.Equal(got, []string{"2Gi", "2Gi"}) {
		t.Errorf("claims %v after the replacement, want 2Gi", got)
	}
}

// A StorageClass that does not allow expansion: the volumes and the claim template keep their
// size, and the share says so on its Applied condition and in a Warning Event, while the rest of
// the share goes on as before.
func TestStorageThatCannotGrowKeepsItsSize(t *testing.T) {
	storageClass(t, "fixed", false)
	startAgent(t, hub.Config, agentMemberConfig(t, "agent-fixed-storage", nil))
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary, withStorage("1Gi", "fixed"))
	old := s.waitSTS("StatefulSet", func(sts *appsv1.StatefulSet) bool { return true })
	s.runPods(old, 0)
	s.waitMDB("Applied at 1Gi", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "True/"+dbfleetv1alpha1.ReasonApplied
	})

	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Database.Storage.Size = resource.MustParse("2Gi") })
	got := s.waitMDB("not expandable reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "False/"+dbfleetv1alpha1.ReasonStorageNotExpandable
	})
	c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
	if !strings.Contains(c.Message, "StorageClass fixed does not allow volume expansion") {
		t.Errorf("Applied message %q does not name the StorageClass", c.Message)
	}
	if !condition(got, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse) || got.Status.Epoch != 1 {
		t.Errorf("the share is reported broken: %+v", got.Status)
	}
	now := &appsv1.StatefulSet{}
	if err := east.Client.Get(s.ctx, s.key(s.db), now); err != nil {
		t.Fatal(err)
	}
	if now.UID != old.UID || !now.DeletionTimestamp.IsZero() || templateSize(now) != "1Gi" {
		t.Errorf("StatefulSet replaced or deleted (UID %s, was %s; claim template %s)", now.UID, old.UID, templateSize(now))
	}
	if sizes := s.claimSizes(0); sizes[0] != "1Gi" {
		t.Errorf("claim %v, want it kept at 1Gi", sizes)
	}
	s.eventually("Warning Event on the MemberDatabase", func() bool {
		evs := &eventsv1.EventList{}
		if err := hub.Client.List(s.ctx, evs, client.InNamespace(s.mdb.Namespace)); err != nil {
			return false
		}
		return slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == s.mdb.Name && e.Type == corev1.EventTypeWarning && e.Reason == dbfleetv1alpha1.ReasonStorageNotExpandable
		})
	})
}

// An object the agent cannot write (here its PodDisruptionBudgets, which its RBAC does not let it
// change) fails on its own: the primary Lease is still renewed with every hub renewal, the pods
// still labelled, and a demotion still acknowledged after the Lease is released.
func TestAFailingObjectDoesNotStopTheLease(t *testing.T) {
	noPDBWrites := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		for i := range rules {
			if slices.Contains(rules[i].Resources, "poddisruptionbudgets") {
				rules[i].Verbs = []string{"get", "list", "watch"}
			}
		}
		return rules
	}
	clock := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(clock, 15*time.Second)
	guard.Renewed(clock.Now())
	startAgentWithGuard(t, hub.Config, agentMemberConfig(t, "agent-no-pdb", noPDBWrites), guard)

	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.createPods(sts, 0, 1)
	renewedAt := func(at time.Time) func() bool {
		return func() bool {
			l := s.primaryLease()
			return l != nil && *l.Spec.HolderIdentity == clusterName+"/1" && l.Spec.RenewTime.Time.Equal(at.Truncate(time.Microsecond))
		}
	}
	s.eventually("primary Lease held and pods labelled despite the failing budgets", func() bool {
		return renewedAt(guard.LastRenewStart())() && s.podRole(s.db+"-0") == "primary" && s.podRole(s.db+"-1") == "replica"
	})
	got := s.waitMDB("the budgets' failure reported, the epoch acknowledged", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "False/"+dbfleetv1alpha1.ReasonApplyFailed && m.Status.Epoch == 1
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied); !strings.Contains(c.Message, "PodDisruptionBudget") {
		t.Errorf("Applied message %q does not name the failing object", c.Message)
	}
	if err := east.Client.Get(s.ctx, s.key(specs.ReplicaPDBName(s.db)), &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Fatalf("test setup: the agent could write a PodDisruptionBudget (%v)", err)
	}

	// A later hub renewal reaches the primary Lease although the budgets still fail.
	clock.Step(2 * time.Second)
	guard.Renewed(clock.Now())
	s.touch(nil)
	s.eventually("primary Lease renewed again", renewedAt(clock.Now()))

	// Demoted at epoch 2: the Lease is released and the epoch acknowledged.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Role, m.Spec.Epoch = dbfleetv1alpha1.RoleReplica, 2 })
	s.waitMDB("demotion acknowledged", func(m *dbfleetv1alpha1.MemberDatabase) bool { return m.Status.Epoch == 2 })
	if l := s.primaryLease(); l != nil {
		t.Errorf("the demoted share still holds the primary Lease %s", *l.Spec.HolderIdentity)
	}
	if s.podRole(s.db+"-0") != "replica" {
		t.Errorf("demoted primary pod labelled %s", s.podRole(s.db+"-0"))
	}
}

// An agent whose member ClusterRole predates storage growth may not read StorageClasses: growing
// the storage is then refused on Applied, and never holds up the agent (a cached read would wait
// for ever for an informer that cannot list).
func TestUnreadableStorageClassIsReported(t *testing.T) {
	noStorageClasses := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		return slices.DeleteFunc(rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "storageclasses") })
	}
	storageClass(t, "unreadable", true)
	startAgent(t, hub.Config, agentMemberConfig(t, "agent-old-role", noStorageClasses))
	s := newShare(t, 1, 0, dbfleetv1alpha1.RoleReplica, withStorage("1Gi", "unreadable"))
	old := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.runPods(old, 0)
	s.waitMDB("Applied at 1Gi", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "True/"+dbfleetv1alpha1.ReasonApplied
	})

	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Database.Storage.Size = resource.MustParse("2Gi") })
	got := s.waitMDB("the unreadable StorageClass reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return appliedReason(m) == "False/"+dbfleetv1alpha1.ReasonApplyFailed
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied); !strings.Contains(c.Message, "StorageClass unreadable") {
		t.Errorf("Applied message %q does not name the StorageClass", c.Message)
	}
	if now := s.waitSTS("StatefulSet kept", func(*appsv1.StatefulSet) bool { return true }); now.UID != old.UID || templateSize(now) != "1Gi" {
		t.Errorf("StatefulSet replaced (UID %s, was %s) or its template changed (%s)", now.UID, old.UID, templateSize(now))
	}
}
