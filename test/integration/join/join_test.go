package join

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	hubpkg "github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestAgentCredentialIsLeastPrivilege checks, against the API server's RBAC, everything the
// minted token must be able to do and a list of things it must not.
func TestAgentCredentialIsLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	alpha := joinCluster(t, "alpha")
	joinCluster(t, "beta")
	agent := clientFor(t, alpha.hubKubeconfig)
	nsAlpha, nsBeta := dbfleetv1alpha1.MemberNamespace("alpha"), dbfleetv1alpha1.MemberNamespace("beta")

	mine := memberDatabase(t, "alpha", "shop", "orders")
	memberDatabase(t, "beta", "shop", "orders")

	// Allowed: its shares.
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	allowed(t, "get a MemberDatabase in its namespace", agent.Get(ctx, client.ObjectKeyFromObject(mine), mdb))
	list := &dbfleetv1alpha1.MemberDatabaseList{}
	allowed(t, "list MemberDatabases in its namespace", agent.List(ctx, list, client.InNamespace(nsAlpha)))
	if len(list.Items) != 1 {
		t.Errorf("listed %d MemberDatabases in %s, want 1", len(list.Items), nsAlpha)
	}
	w, err := agent.Watch(ctx, &dbfleetv1alpha1.MemberDatabaseList{}, client.InNamespace(nsAlpha))
	allowed(t, "watch MemberDatabases in its namespace", err)
	if err == nil {
		ev := <-w.ResultChan()
		if ev.Type != watch.Added {
			t.Errorf("watch started with %s %v, want the existing MemberDatabase Added", ev.Type, ev.Object)
		}
		w.Stop()
	}
	mdb.Status.ObservedGeneration = mdb.Generation
	mdb.Status.ReadyReplicas = 1
	meta.SetStatusCondition(&mdb.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "test"})
	allowed(t, "update MemberDatabase status", agent.Status().Update(ctx, mdb))
	before := mdb.DeepCopy()
	controllerutil.AddFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer)
	allowed(t, "add its finalizer to a MemberDatabase", agent.Patch(ctx, mdb, client.MergeFrom(before)))

	// Allowed: its heartbeat Lease, by name.
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: dbfleetv1alpha1.AgentLeaseName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("alpha"), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	allowed(t, "create its Lease", agent.Create(ctx, lease))
	allowed(t, "get its Lease", agent.Get(ctx, client.ObjectKeyFromObject(lease), lease))
	now := metav1.NowMicro()
	lease.Spec.RenewTime = &now
	allowed(t, "update its Lease", agent.Update(ctx, lease))

	// Allowed: its report on its cluster, by name.
	report := &dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: "alpha"}}
	report.Status.KubernetesVersion = "v1.35.4"
	allowed(t, "create its MemberClusterReport", agent.Create(ctx, report))
	allowed(t, "get its MemberClusterReport", agent.Get(ctx, client.ObjectKeyFromObject(report), report))
	report.Status.Agent = &dbfleetv1alpha1.AgentSettings{HeartbeatIntervalSeconds: 5, FenceAfterSeconds: 15}
	allowed(t, "update its MemberClusterReport", agent.Update(ctx, report))
	// Allowed: the database credentials the hub carries to its namespace.
	carried := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: "shop.orders-app"},
		Data: map[string][]byte{"username": []byte("app"), "password": []byte("secret")}}
	if err := hub.Client.Create(ctx, carried); err != nil {
		t.Fatal(err)
	}
	allowed(t, "read the credentials carried to its namespace", agent.Get(ctx, client.ObjectKeyFromObject(carried), &corev1.Secret{}))
	allowed(t, "list Secrets in its namespace", agent.List(ctx, &corev1.SecretList{}, client.InNamespace(nsAlpha)))
	allowed(t, "watch Secrets in its namespace", func() error {
		w, err := agent.Watch(ctx, &corev1.SecretList{}, client.InNamespace(nsAlpha))
		if err == nil {
			w.Stop()
		}
		return err
	}())
	// Events about its work.
	allowed(t, "create an Event in its namespace", agent.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: nsAlpha, GenerateName: "alpha-"},
		InvolvedObject: corev1.ObjectReference{Kind: "MemberDatabase", Namespace: nsAlpha, Name: mine.Name},
		Reason:         "Test", Message: "test", Type: corev1.EventTypeNormal,
	}))

	// Forbidden.
	forbidden(t, "list MemberDatabases of another member", agent.List(ctx, &dbfleetv1alpha1.MemberDatabaseList{}, client.InNamespace(nsBeta)))
	forbidden(t, "list MemberDatabases of every namespace", agent.List(ctx, &dbfleetv1alpha1.MemberDatabaseList{}))
	// Nothing cluster-wide: not even its own MemberCluster (the hub copies the report into it).
	forbidden(t, "get its MemberCluster", agent.Get(ctx, client.ObjectKey{Name: "alpha"}, &dbfleetv1alpha1.MemberCluster{}))
	forbidden(t, "get another MemberCluster", agent.Get(ctx, client.ObjectKey{Name: "beta"}, &dbfleetv1alpha1.MemberCluster{}))
	forbidden(t, "list MemberClusters", agent.List(ctx, &dbfleetv1alpha1.MemberClusterList{}))
	mc := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "alpha"}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Status.KubernetesVersion = "forged"
	forbidden(t, "update its MemberCluster's status", agent.Status().Update(ctx, mc))
	mc.Spec.Region = "forged"
	forbidden(t, "update its MemberCluster's spec", agent.Update(ctx, mc))
	forbidden(t, "create a MemberClusterReport in another member's namespace", agent.Create(ctx,
		&dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{Namespace: nsBeta, Name: "beta"}}))
	other := &dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: "other"}}
	if err := hub.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	forbidden(t, "read a report under another name", agent.Get(ctx, client.ObjectKeyFromObject(other), other))
	forbidden(t, "list MemberClusterReports", agent.List(ctx, &dbfleetv1alpha1.MemberClusterReportList{}, client.InNamespace(nsAlpha)))
	forbidden(t, "delete its MemberClusterReport", agent.Delete(ctx, report))
	forbidden(t, "list DatabaseClusters", agent.List(ctx, &dbfleetv1alpha1.DatabaseClusterList{}))
	forbidden(t, "list DatabaseClusters in a namespace", agent.List(ctx, &dbfleetv1alpha1.DatabaseClusterList{}, client.InNamespace("shop")))
	forbidden(t, "list PropagationPolicies", agent.List(ctx, &dbfleetv1alpha1.PropagationPolicyList{}))
	forged := mine.DeepCopy()
	forged.ResourceVersion, forged.UID, forged.Name = "", "", "shop.forged"
	forbidden(t, "create a MemberDatabase", agent.Create(ctx, forged))
	forbidden(t, "delete a MemberDatabase", agent.Delete(ctx, mine))
	forbidden(t, "read a Secret in another member's namespace", agent.Get(ctx, client.ObjectKey{Namespace: nsBeta, Name: "shop.orders-app"}, &corev1.Secret{}))
	forbidden(t, "list Secrets in another member's namespace", agent.List(ctx, &corev1.SecretList{}, client.InNamespace(nsBeta)))
	forbidden(t, "list Secrets of every namespace", agent.List(ctx, &corev1.SecretList{}))
	forbidden(t, "write the credentials carried to it", agent.Delete(ctx, carried))
	forbidden(t, "list Leases", agent.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(nsAlpha)))
	forbidden(t, "get another Lease", agent.Get(ctx, client.ObjectKey{Namespace: nsAlpha, Name: "other"}, &coordinationv1.Lease{}))
	forbidden(t, "create a Lease in another member's namespace", agent.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsBeta, Name: dbfleetv1alpha1.AgentLeaseName},
	}))
	forbidden(t, "delete its Lease", agent.Delete(ctx, lease))
	forbidden(t, "list ServiceAccounts", agent.List(ctx, &corev1.ServiceAccountList{}, client.InNamespace(nsAlpha)))
	forbidden(t, "read its Role", agent.Get(ctx, client.ObjectKey{Namespace: nsAlpha, Name: join.AgentName}, &rbacv1.Role{}))
	forbidden(t, "list Namespaces", agent.List(ctx, &corev1.NamespaceList{}))

	// What join labelled.
	for _, obj := range []client.Object{
		&dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsAlpha}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: join.AgentName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: join.AgentName}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsAlpha, Name: join.AgentName}},
	} {
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		l := obj.GetLabels()
		if l[dbfleetv1alpha1.LabelCluster] != "alpha" || l[join.LabelManagedBy] != join.ManagedByJoin {
			t.Errorf("%T %s has labels %v, want %s=alpha and %s=%s", obj, obj.GetName(), l,
				dbfleetv1alpha1.LabelCluster, join.LabelManagedBy, join.ManagedByJoin)
		}
	}
}

// TestRejoinRotatesToken checks that joining again revokes the earlier token and mints a new one.
func TestRejoinRotatesToken(t *testing.T) {
	first := joinCluster(t, "gamma")
	old := clientFor(t, first.hubKubeconfig)
	waitAuthn(t, old, "gamma", true)
	if strings.Contains(first.report, "rotated") {
		t.Errorf("a first join reports a rotation:\n%s", first.report)
	}

	second := joinCluster(t, "gamma")
	if !strings.Contains(second.report, "rotated") {
		t.Errorf("a re-join does not say it rotated the credential:\n%s", second.report)
	}
	waitAuthn(t, old, "gamma", false)
	fresh := clientFor(t, second.hubKubeconfig)
	waitAuthn(t, fresh, "gamma", true)
	allowed(t, "list its MemberDatabases with the new token", fresh.List(context.Background(), &dbfleetv1alpha1.MemberDatabaseList{},
		client.InNamespace(dbfleetv1alpha1.MemberNamespace("gamma"))))
}

// legacyClusterGrant creates the ClusterRole and ClusterRoleBinding with which joins before the
// MemberClusterReport let a cluster's agent write its MemberCluster's status.
func legacyClusterGrant(t *testing.T, cluster string) []client.Object {
	t.Helper()
	name := join.ClusterRoleName(cluster)
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"dbfleet.io"}, Resources: []string{"memberclusters/status"}, ResourceNames: []string{cluster}, Verbs: []string{"update"},
		}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: join.AgentName}},
		},
	}
	for _, obj := range objs {
		if err := hub.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

// TestRejoinRemovesTheLegacyClusterWideGrant checks that joining a cluster joined by an earlier
// version deletes the per-agent ClusterRoleBinding, which every request to the hub API server
// paid for with an RBAC scan.
func TestRejoinRemovesTheLegacyClusterWideGrant(t *testing.T) {
	joinCluster(t, "eta")
	legacy := legacyClusterGrant(t, "eta")
	joinCluster(t, "eta")
	for _, obj := range legacy {
		if err := hub.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after a re-join: %v, want NotFound", obj, obj.GetName(), err)
		}
	}
}

// TestRejoinUpdatesMemberCluster checks that join declares the MemberCluster: labels and fields it
// set before and not now go away, what others set stays, and the sync mode cannot change.
func TestRejoinUpdatesMemberCluster(t *testing.T) {
	ctx := context.Background()
	joinCluster(t, "delta", "--provider", "aws", "--label", "tier=gold", "--label", "team=db")
	mc := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "delta"}, mc); err != nil {
		t.Fatal(err)
	}
	if mc.Spec.Provider != "aws" || mc.Labels["tier"] != "gold" || mc.Spec.SyncMode != dbfleetv1alpha1.SyncPull {
		t.Fatalf("MemberCluster after join: labels %v spec %+v", mc.Labels, mc.Spec)
	}
	// An admin taints the cluster and labels it by hand.
	mc.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	mc.Labels["owner"] = "ops"
	if err := hub.Client.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}

	joinCluster(t, "delta", "--label", "tier=silver")
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "delta"}, mc); err != nil {
		t.Fatal(err)
	}
	if mc.Labels["tier"] != "silver" || mc.Labels["team"] != "" || mc.Labels["owner"] != "ops" {
		t.Errorf("labels after re-join %v, want tier=silver, no team, owner=ops kept", mc.Labels)
	}
	if mc.Spec.Provider != "" || len(mc.Spec.Taints) != 1 {
		t.Errorf("spec after re-join %+v, want no provider and the admin's taint kept", mc.Spec)
	}

	_, _, err := hubCommand(t, "join", "delta", "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a",
		"--sync-mode", "Push", "--member-kubeconfig", adminKubeconfig)
	if err == nil || !strings.Contains(err.Error(), "sync mode cannot change") {
		t.Errorf("switching a Pull cluster to Push: %v, want a refusal saying the sync mode cannot change", err)
	}
}

// TestUnjoin checks that unjoin refuses while the cluster holds shares, that --force removes them
// and revokes the credential, and that it can be repeated.
func TestUnjoin(t *testing.T) {
	ctx := context.Background()
	j := joinCluster(t, "epsilon")
	agent := clientFor(t, j.hubKubeconfig)
	waitAuthn(t, agent, "epsilon", true)
	mdb := memberDatabase(t, "epsilon", "shop", "orders")
	memberDatabase(t, "epsilon", "billing", "ledger")
	// The agent holds a share with its finalizer, as it does while the share runs.
	before := mdb.DeepCopy()
	controllerutil.AddFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer)
	if err := agent.Patch(ctx, mdb, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	legacyClusterGrant(t, "epsilon") // as if joined by an earlier version

	_, _, err := hubCommand(t, "unjoin", "epsilon", "--kubeconfig", adminKubeconfig)
	if err == nil || !errors.Is(err, join.ErrClusterInUse) ||
		!strings.Contains(err.Error(), "billing/ledger, shop/orders") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("unjoin with MemberDatabases: %v, want a refusal naming billing/ledger and shop/orders and --force", err)
	}
	waitAuthn(t, agent, "epsilon", true) // nothing was revoked

	stdout, _, err := hubCommand(t, "unjoin", "epsilon", "--force", "--kubeconfig", adminKubeconfig)
	if err != nil {
		t.Fatalf("unjoin --force: %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, "forced") {
		t.Errorf("unjoin --force does not say it abandoned shares:\n%s", stdout)
	}
	waitAuthn(t, agent, "epsilon", false)
	for _, obj := range []client.Object{
		&dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "epsilon"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: join.ClusterRoleName("epsilon")}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: join.ClusterRoleName("epsilon")}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "member-epsilon", Name: join.AgentName}},
		mdb,
	} {
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after unjoin: %v, want NotFound", obj, obj.GetName(), err)
		}
	}
	// envtest runs no namespace controller: the namespace stays Terminating, which is all unjoin
	// can do.
	ns := &corev1.Namespace{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "member-epsilon"}, ns); err == nil && ns.DeletionTimestamp.IsZero() {
		t.Error("namespace member-epsilon is not being deleted after unjoin")
	}

	// Again: nothing left to do, and no error.
	if stdout, _, err := hubCommand(t, "unjoin", "epsilon", "--kubeconfig", adminKubeconfig); err != nil {
		t.Errorf("repeated unjoin: %v\n%s", err, stdout)
	}
	// Joining while the namespace terminates is refused with a hint.
	_, _, err = hubCommand(t, "join", "epsilon", "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a")
	if err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("join while member-epsilon terminates: %v, want a refusal saying it is being deleted", err)
	}
	// A cluster that never joined unjoins cleanly too.
	if _, _, err := hubCommand(t, "unjoin", "never-joined", "--kubeconfig", adminKubeconfig); err != nil {
		t.Errorf("unjoin of a cluster that never joined: %v", err)
	}
}

// TestPushMode checks that a Push join stores the member's kubeconfig and creates no agent
// credential, and that unjoin removes the Secret.
func TestPushMode(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "x.yaml")
	_, _, err := hubCommand(t, "join", "zeta", "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a",
		"--sync-mode", "Push", "-o", out)
	if err == nil || !strings.Contains(err.Error(), "--member-kubeconfig is required") || !strings.Contains(err.Error(), "--output") {
		t.Errorf("Push without --member-kubeconfig and with -o: %v, want both named", err)
	}

	// A cluster admin's kubeconfig is refused: the hub would keep it in a Secret.
	_, _, err = hubCommand(t, "join", "zeta", "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a",
		"--sync-mode", "Push", "--member-kubeconfig", adminKubeconfig)
	if err == nil || !strings.Contains(err.Error(), "may every verb on every resource (cluster-admin), create ClusterRoleBindings") ||
		!strings.Contains(err.Error(), "--allow-broad-kubeconfig") {
		t.Errorf("Push with a cluster admin's kubeconfig: %v, want refused, naming its rights and the way out", err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "zeta"}, &dbfleetv1alpha1.MemberCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused Push join left a MemberCluster: %v", err)
	}
	// Accepted with the flag, and said loudly.
	_, stderr, err := hubCommand(t, "join", "zeta", "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a",
		"--sync-mode", "Push", "--member-kubeconfig", adminKubeconfig, "--allow-broad-kubeconfig")
	if err != nil || !strings.Contains(stderr, "warning: zeta's kubeconfig may every verb on every resource (cluster-admin)") {
		t.Errorf("Push with --allow-broad-kubeconfig: %v, want joined with a warning:\n%s", err, stderr)
	}
	// A user with exactly the member rules the hub needs joins without a word.
	rules := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "push-zeta"}, Rules: join.AgentMemberRules()}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "push-zeta"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "push-zeta"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "push-zeta"}}}
	for _, obj := range []client.Object{rules, binding} {
		if err := hub.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	limited, err := hub.Kubeconfig("push-zeta")
	if err != nil {
		t.Fatal(err)
	}
	limitedPath := filepath.Join(t.TempDir(), "push-zeta.kubeconfig")
	if err := os.WriteFile(limitedPath, limited, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := hubCommand(t, "join", "zeta", "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a",
		"--sync-mode", "Push", "--member-kubeconfig", limitedPath)
	if err != nil {
		t.Fatalf("join in Push mode: %v\n%s", err, stderr)
	}
	if strings.Contains(stderr, "more than the hub needs") {
		t.Errorf("Push with exactly the member rules warned:\n%s", stderr)
	}
	if stdout != "" {
		t.Errorf("Push mode printed manifests:\n%s", stdout)
	}
	if !strings.Contains(stderr, push.SecretName("zeta")) {
		t.Errorf("Push join does not name the Secret it wrote:\n%s", stderr)
	}
	mc := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "zeta"}, mc); err != nil {
		t.Fatal(err)
	}
	ref := mc.Spec.KubeconfigSecretRef
	if mc.Spec.SyncMode != dbfleetv1alpha1.SyncPush || ref == nil || ref.Namespace != hubpkg.Namespace || ref.Name != "zeta" {
		t.Fatalf("MemberCluster spec %+v, want Push with kubeconfigSecretRef dbfleet-system/zeta", mc.Spec)
	}
	secret := &corev1.Secret{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Labels[dbfleetv1alpha1.LabelCluster] != "zeta" || secret.Labels[push.SecretLabel] != "true" {
		t.Errorf("Secret labels %v", secret.Labels)
	}
	// The stored kubeconfig works: it reaches the "member" (here the hub itself).
	member := clientFor(t, secret.Data[push.SecretKey])
	if err := member.List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Errorf("the stored kubeconfig does not work: %v", err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: "member-zeta", Name: join.AgentName}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("Push mode created an agent ServiceAccount: %v", err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: join.ClusterRoleName("zeta")}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("Push mode created an agent ClusterRole: %v", err)
	}

	if stdout, _, err := hubCommand(t, "unjoin", "zeta", "--kubeconfig", adminKubeconfig); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, stdout)
	}
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); !apierrors.IsNotFound(err) {
		t.Errorf("Push Secret after unjoin: %v, want NotFound", err)
	}
}

// TestMemberManifestsApply checks the agent manifests: the kinds, RBAC without wildcards and
// exactly the rules the agent needs, the Deployment, and that a member API server accepts them.
func TestMemberManifestsApply(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "east-agent.yaml")
	stdout, _, err := hubCommand(t, "join", "east", "--kubeconfig", adminKubeconfig, "--region", "us-east-1", "--zone", "us-east-1a",
		"--hub-server", "https://hub.example.com:6443", "--agent-image", "registry.example.com/dbfleet/agent:v1",
		"--heartbeat-interval", "2s", "--fence-after", "9s", "-o", out)
	if err != nil {
		t.Fatalf("join: %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, out) {
		t.Errorf("join -o does not say where it wrote the manifests:\n%s", stdout)
	}
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("-o file mode %v, want 0600: it holds a credential", info.Mode().Perm())
	}
	objs, err := framework.ReadObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind())
	}
	want := []string{"Namespace", "Secret", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("manifest kinds %v, want %v", kinds, want)
	}
	j := &joined{name: "east", manifests: objs}
	assertNoWildcards(t, j.find(t, "ClusterRole", join.AgentName))
	checkDeployment(t, j.find(t, "Deployment", join.AgentName))

	member, err := framework.StartMember("east")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := member.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, obj := range objs {
		if err := member.Client.Create(ctx, obj); err != nil {
			t.Fatalf("apply %s %s to the member: %v", obj.GetKind(), obj.GetName(), err)
		}
	}

	// The member-side role, as the agent's ServiceAccount: enough for a share, nothing more.
	asAgent := memberClientAs(t, member, "system:serviceaccount:dbfleet-system:dbfleet-agent")
	checkAgentScope(ctx, t, member, asAgent)
	forbidden(t, "bind cluster-admin in the member", asAgent.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "shop", Name: "default"}},
	}))
	forbidden(t, "delete a namespace in the member", asAgent.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}))
	forbidden(t, "create a Pod in the member", asAgent.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}))
	forbidden(t, "change RBAC in the member", asAgent.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}))

	// The kubeconfig in the Secret names the hub server and the member namespace.
	kc, err := clientcmdLoad(j)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := kc.CurrentContext
	if kc.Clusters[kc.Contexts[ctxName].Cluster].Server != "https://hub.example.com:6443" || kc.Contexts[ctxName].Namespace != "member-east" {
		t.Errorf("hub kubeconfig: server %s namespace %s", kc.Clusters[kc.Contexts[ctxName].Cluster].Server, kc.Contexts[ctxName].Namespace)
	}
	if len(kc.Clusters[kc.Contexts[ctxName].Cluster].CertificateAuthorityData) == 0 {
		t.Error("hub kubeconfig has no CA data")
	}

	// Joining against an API server without the dbfleet CRDs (the member, by mistake) says so.
	memberAdmin, err := member.Kubeconfig("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "member.kubeconfig")
	if err := os.WriteFile(path, memberAdmin, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = hubCommand(t, "join", "east", "--kubeconfig", path, "--region", "r1", "--zone", "r1-a")
	if err == nil || !strings.Contains(err.Error(), "install the dbfleet CRDs") {
		t.Errorf("join against an API server without the CRDs: %v, want a hint to install them", err)
	}
}
