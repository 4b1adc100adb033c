package instance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance"
	"github.com/dbfleet/dbfleet/test/framework"
)

const (
	database = "db"
	// leaseDuration is the primary Leases' leaseDurationSeconds (the agent uses fenceAfter).
	leaseDuration = 6 * time.Second
	waitTimeout   = 60 * time.Second
)

// The Secrets, as the hub creates them and the agent mounts them.
var (
	superuser   = secret{"postgres", "super-secret", ""}
	replication = secret{"streaming_replica", "repl-secret", ""}
	app         = secret{"app", "app-secret", "app"}
)

type secret struct{ username, password, dbname string }

func writeSecret(t *testing.T, s secret) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{contract.SecretKeyUsername: s.username, contract.SecretKeyPassword: s.password}
	if s.dbname != "" {
		files[contract.SecretKeyDBName] = s.dbname
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rewriteFile replaces path's content in one rename, as the kubelet swaps a Secret volume's files.
func rewriteFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// freePort is a port free now, below the kernel's ephemeral range (32768 and up): a port from
// ":0" is released here and bound by the instance moments later, and in that gap another
// program's ":0" listener (the parallel suites run many) took it once ("address already in use").
// Ports from 20000 to 32000 are handed out only to those who ask for them by number.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
}

// volume is a data volume the postgres user can reach (t.TempDir's parents are 0700).
func volume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// proc is one dbfleet-instance process standing in for a pod.
type proc struct {
	pod, namespace, cluster string
	pgPort, httpPort        int
	volume                  string
	kubeconfig              string
	// secrets are the mounted superuser, replication, app and TLS Secrets' directories.
	secrets [4]string
	// args are added to the command line (--failsafe, say).
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
}

func (p *proc) endpoint() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.pgPort)) }
func (p *proc) dataDir() string  { return filepath.Join(p.volume, instance.DataDirName) }

// newProc prepares an instance for pod in namespace (the member cluster cluster), with a
// kubeconfig whose user may only get its Pod and the primary Lease.
func newProc(ctx context.Context, t *testing.T, pod, namespace, cluster string) *proc {
	t.Helper()
	return newProcVia(ctx, t, pod, namespace, cluster, nil)
}

// newProcVia is newProc with the instance reaching the API server through proxy (nil: directly).
func newProcVia(ctx context.Context, t *testing.T, pod, namespace, cluster string, proxy *framework.Proxy) *proc {
	t.Helper()
	p := &proc{pod: pod, namespace: namespace, cluster: cluster, pgPort: freePort(t), httpPort: freePort(t),
		volume:  volume(t),
		secrets: [4]string{writeSecret(t, superuser), writeSecret(t, replication), writeSecret(t, app), writeTLSSecret(t, testCA())}}
	user := "instance-" + pod
	grantReadOnly(ctx, t, namespace, pod, user)
	kc, err := member.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	if proxy != nil {
		cfg, err := clientcmd.Load(kc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cfg.Clusters {
			c.Server = "https://" + proxy.Addr()
		}
		if kc, err = clientcmd.Write(*cfg); err != nil {
			t.Fatal(err)
		}
	}
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), pod+".log")
	if p.log, err = os.Create(logPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			lines := strings.Split(string(out), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("last lines of %s's log:\n%s", pod, strings.Join(lines, "\n"))
		}
	})
	return p
}

// grantReadOnly is the instance's Role, as the agent writes it: get and watch its own Pod and the
// primary Lease by name, nothing more.
func grantReadOnly(ctx context.Context, t *testing.T, namespace, pod, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{pod}, Verbs: []string{"get", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{contract.PrimaryLeaseName(database)}, Verbs: []string{"get", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := member.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(binary,
		"--pod-name", p.pod, "--namespace", p.namespace, "--cluster", p.cluster, "--database", database,
		"--kubeconfig", p.kubeconfig, "--data-volume", p.volume, "--bin-dir", pgBin,
		"--http-port", strconv.Itoa(p.httpPort), "--postgres-port", strconv.Itoa(p.pgPort), "--listen-addresses", "127.0.0.1",
		"--superuser-secret-dir", p.secrets[0], "--replication-secret-dir", p.secrets[1], "--app-secret-dir", p.secrets[2], "--tls-secret-dir", p.secrets[3],
		"--run-as", "postgres", "--poll-interval", "200ms")
	cmd.Args = append(cmd.Args, p.args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
}

// stop sends SIGTERM (fast shutdown) and waits for the manager to exit.
func (p *proc) stop(t *testing.T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Errorf("%s did not exit within a minute of SIGTERM; killing it", p.pod)
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}

func (p *proc) status(ctx context.Context) (contract.Status, error) {
	var st contract.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", p.httpPort, contract.Path), nil)
	if err != nil {
		return st, err
	}
	c, err := p.statusClient()
	if err != nil {
		return st, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: HTTP %d", req.URL, resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// probeClient probes as the kubelet does: HTTPS, no client certificate, no verification.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // what the kubelet does

func (p *proc) ready(ctx context.Context) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", p.httpPort, contract.ReadyPath), nil)
	if err != nil {
		return false, err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// waitStatus waits until the instance's /status satisfies cond.
func (p *proc) waitStatus(ctx context.Context, t *testing.T, what string, cond func(contract.Status) bool) contract.Status {
	t.Helper()
	var last contract.Status
	err := framework.WaitFor(ctx, waitTimeout, p.pod+" "+what, func(ctx context.Context) (bool, error) {
		st, err := p.status(ctx)
		if err != nil {
			return false, err
		}
		last = st
		return cond(st), nil
	})
	if err != nil {
		t.Fatalf("%v; last status: %+v", err, last)
	}
	return last
}

// postmasterPID reads the running postmaster's pid from postmaster.pid.
func (p *proc) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
}

func (p *proc) connect(ctx context.Context, s secret, password string) (*pgx.Conn, error) {
	db := s.dbname
	if db == "" {
		db = "postgres"
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s connect_timeout=5", p.pgPort, s.username, db))
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	if cfg.TLSConfig, err = p.clientTLS(s); err != nil {
		return nil, err
	}
	cfg.Fallbacks = nil
	return pgx.ConnectConfig(ctx, cfg)
}

// pod is the Pod the agent would have created, labelled and annotated.
func createPod(ctx context.Context, t *testing.T, namespace, name, role string, epoch int64, endpoint, standbys string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels:      map[string]string{contract.LabelRole: role},
		Annotations: map[string]string{contract.AnnotationEpoch: strconv.FormatInt(epoch, 10), contract.AnnotationPrimaryEndpoint: endpoint, contract.AnnotationStandbys: standbys}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "postgres", Image: "postgres:15"}}}}
	if err := member.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// setPod relabels and re-annotates a pod as the agent would.
func setPod(ctx context.Context, t *testing.T, namespace, name string, role string, epoch int64, endpoint, standbys string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[contract.LabelRole] = role
	pod.Annotations[contract.AnnotationEpoch] = strconv.FormatInt(epoch, 10)
	pod.Annotations[contract.AnnotationPrimaryEndpoint] = endpoint
	pod.Annotations[contract.AnnotationStandbys] = standbys
	if err := member.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func createNamespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	namespaces.Store(name, true)
}

// renewer renews a primary Lease as the agent does, every 500 ms, until stopped.
type renewer struct {
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

func renew(t *testing.T, namespace, holder string) *renewer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &renewer{cancel: cancel, done: make(chan struct{})}
	renewOnce := func() error {
		return fence.RenewPrimaryLease(ctx, member.Client, namespace, database, holder, time.Now(), leaseDuration, nil)
	}
	if err := renewOnce(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := renewOnce(); err != nil && ctx.Err() == nil {
					t.Logf("renew %s/%s: %v", namespace, holder, err)
				}
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *renewer) stop() {
	r.stopOnce.Do(func() { r.cancel(); <-r.done })
}

func getLease(ctx context.Context, t *testing.T, namespace string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: contract.PrimaryLeaseName(database)}, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// initdbElsewhere initialises a database of another system in dir, as the postgres user.
func initdbElsewhere(t *testing.T, dir string) {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(pgBin, "initdb"), "-D", dir, "--auth=trust", "-U", "someone")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out.String())
	}
}

// annotatePod sets annotations on a pod as the agent would (an empty value removes one).
func annotatePod(ctx context.Context, t *testing.T, namespace, name string, annotations map[string]string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	for k, v := range annotations {
		if v == "" {
			delete(pod.Annotations, k)
		} else {
			pod.Annotations[k] = v
		}
	}
	if err := member.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}
