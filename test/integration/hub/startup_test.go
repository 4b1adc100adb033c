package hub

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/test/framework"
)

// hubBinary builds cmd/hub and writes a kubeconfig for user (in groups) on the test hub.
func hubBinary(t *testing.T, user string, groups ...string) (bin, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	if err := framework.Build(dir, "./cmd/hub"); err != nil {
		t.Fatal(err)
	}
	kc, err := env.Kubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(dir, "hub.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "hub"), kubeconfig
}

// TestHubRunOnABareHub runs `hub run`, with leader election as deployed, against a hub API
// server that lacks the hub's namespace: the hub creates it, takes leadership and runs its
// controllers (it used to retry creating the leader election Lease for ever and run nothing).
func TestHubRunOnABareHub(t *testing.T) {
	bin, kubeconfig := hubBinary(t, "bare-hub-admin", "system:masters")
	f := newFixture(t)
	ns := f.suite + "-system" // not dbfleet-system, which other tests of the suite create
	var logs bytes.Buffer
	cmd := exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--leader-election-namespace", ns,
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
		}
		if t.Failed() {
			t.Logf("hub logs:\n%s", logs.String())
		}
	})

	lease := &coordinationv1.Lease{}
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the hub leading from namespace "+ns, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			t.Fatalf("hub run exited: %v", err)
		default:
		}
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dbfleet-hub"}, lease); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	f.waitMemberDatabases("orders", map[string]int32{a: 2})
}

// TestHubRunWithoutItsNamespaceNamesTheFix runs `hub run` as an identity that may not create
// namespaces (as deployed) against a hub without its namespace: it exits at once and says how
// to fix it, instead of retrying leader election for ever.
func TestHubRunWithoutItsNamespaceNamesTheFix(t *testing.T) {
	const user = "hub-without-namespace"
	bin, kubeconfig := hubBinary(t, user)
	f := newFixture(t)
	ns := f.suite + "-missing"
	// What leader election needs, cluster-wide (a Role cannot live in a namespace that does not exist).
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: f.suite + "-leases"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: f.suite + "-leases"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := f.c.Create(f.ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.c.Delete(context.Background(), obj) })
	}

	ctx, cancel := context.WithTimeout(f.ctx, framework.DefaultTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "run", "--kubeconfig", kubeconfig, "--leader-election-namespace", ns,
		"--metrics-bind-address=0", "--health-probe-bind-address=0").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("hub run did not exit within %s without its namespace:\n%s", framework.DefaultTimeout, out)
	}
	if err == nil || !strings.Contains(string(out), "kubectl create namespace "+ns) {
		t.Errorf("hub run without its namespace: err=%v, want a non-zero exit naming the fix; output:\n%s", err, out)
	}
	if err := f.c.Get(f.ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err == nil {
		t.Errorf("namespace %s exists, created by an identity that may not", ns)
	}
}
