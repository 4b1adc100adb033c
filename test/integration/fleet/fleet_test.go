package fleet

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	harness "github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

var hub *framework.Environment

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping fleet tests in -short mode")
		os.Exit(0)
	}
	var err error
	if hub, err = framework.StartHub(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = hub.Stop()
	os.Exit(code)
}

// process is a binary the test started, through the shared process harness; it is stopped
// (SIGTERM, then SIGKILL) at cleanup, and its log is shown when the test failed.
type process struct{ *harness.Process }

func start(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	name := filepath.Base(bin)
	p, err := harness.Start(harness.Spec{
		Name:    name,
		Args:    append([]string{bin}, args...),
		LogFile: filepath.Join(t.TempDir(), name+".log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	proc := &process{p}
	t.Cleanup(func() {
		proc.stop()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, proc.Output())
		}
	})
	return proc
}

// stop ends the process (SIGTERM, SIGKILL after 20s) and waits for it; safe to call twice.
func (p *process) stop() { _, _ = p.Stop(20 * time.Second) }

// kill ends the process at once, as a crash would.
func (p *process) kill() {
	_ = syscall.Kill(p.Pid(), syscall.SIGKILL)
	<-p.Done()
}

func build(t *testing.T, dir string) (hubBin, agentBin string) {
	t.Helper()
	if err := framework.Build(dir, "./cmd/hub", "./cmd/agent"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "hub"), filepath.Join(dir, "agent")
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startMember starts an API server standing in for a member cluster, stopped at cleanup.
func startMember(t *testing.T, name string) *framework.Environment {
	t.Helper()
	env, err := framework.StartMember(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

// memberKubeconfig mints a token for the agent's ServiceAccount in the member, as the pod would
// mount it, so the agent runs with exactly the member RBAC the join manifests grant.
func memberKubeconfig(t *testing.T, east *framework.Environment) []byte {
	t.Helper()
	cs, err := kubernetes.NewForConfig(east.Config)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(join.SystemNamespace).CreateToken(context.Background(), join.AgentName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["east"] = &clientcmdapi.Cluster{Server: east.Config.Host, CertificateAuthorityData: east.Config.CAData}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["east"] = &clientcmdapi.Context{Cluster: "east", AuthInfo: "agent"}
	cfg.CurrentContext = "east"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestJoinAgentAndHubEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hubBin, agentBin := build(t, dir)
	admin, err := hub.Kubeconfig("fleet-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	adminPath := writeFile(t, filepath.Join(dir, "hub-admin.kubeconfig"), admin)

	// hub join east, its manifests applied to the member, the agent on those credentials.
	m := joinMember(t, hubBin, agentBin, adminPath, dir, "east", "us-east", false)
	east, agent := m.env, m.agent
	start(t, hubBin, "run", "--kubeconfig", adminPath, "--leader-elect=false", "--cluster-grace-period", "3s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")

	waitMember(t, "east", "east Ready", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) &&
			mc.Status.KubernetesVersion == "v1.35.4" && mc.Status.Agent != nil && mc.Status.Agent.HeartbeatIntervalSeconds == 1
	})

	// Place a database on east.
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "east-only"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{Name: "orders"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided},
			},
		},
	}
	if err := hub.Client.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}},
			Replicas: 2,
		},
	}
	if err := hub.Client.Create(ctx, dbc); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	if err := framework.WaitFor(ctx, framework.DefaultTimeout, "the StatefulSet in east", func(ctx context.Context) (bool, error) {
		return true, east.Client.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders"}, sts)
	}); err != nil {
		t.Fatal(err)
	}
	// The member's controller manager is not running here: report the pods ready as it would.
	markReady(t, east, "shop")
	waitDatabase(t, "shop", "Available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) && d.Status.Ready == "2/2"
	})

	// The agent crashes: the hub sees no renewal for the grace period and says so.
	killed := time.Now()
	agent.kill()
	mc := waitMember(t, "east", "east Unknown and tainted", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) &&
			len(mc.Spec.Taints) == 2
	})
	t.Logf("hub marked east Unknown %s after the agent was killed (grace 3s)", time.Since(killed).Round(100*time.Millisecond))
	for _, taint := range mc.Spec.Taints {
		if taint.Key != dbfleetv1alpha1.TaintClusterUnreachable {
			t.Errorf("unexpected taint %v", taint)
		}
	}
	waitDatabase(t, "shop", "share Unknown", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 1 && d.Status.Placements[0].State == dbfleetv1alpha1.PlacementUnknown &&
			meta.IsStatusConditionPresentAndEqual(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionUnknown)
	})
}

func waitMember(t *testing.T, name, what string, cond func(*dbfleetv1alpha1.MemberCluster) bool) *dbfleetv1alpha1.MemberCluster {
	t.Helper()
	mc := &dbfleetv1alpha1.MemberCluster{}
	err := framework.WaitFor(context.Background(), framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := hub.Client.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			return false, err
		}
		return cond(mc), nil
	})
	if err != nil {
		t.Fatalf("%v\nspec %+v\nstatus %+v", err, mc.Spec, mc.Status)
	}
	return mc
}

func waitDatabase(t *testing.T, ns, what string, cond func(*dbfleetv1alpha1.DatabaseCluster) bool) *dbfleetv1alpha1.DatabaseCluster {
	t.Helper()
	d := &dbfleetv1alpha1.DatabaseCluster{}
	err := framework.WaitFor(context.Background(), framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, d); err != nil {
			return false, err
		}
		return cond(d), nil
	})
	if err != nil {
		t.Fatalf("%v\nstatus %+v", err, d.Status)
	}
	return d
}
