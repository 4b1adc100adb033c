package framework

import (
	"fmt"
	"os"
	"sync"

	"github.com/go-logr/logr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// Scheme knows the built-in kinds, CRDs and dbfleet's kinds.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// Environment is one running API server (with its own etcd) and an admin client for it.
type Environment struct {
	// Name tells environments apart in errors ("hub", or a member cluster's name).
	Name   string
	Config *rest.Config
	Client client.Client

	env *envtest.Environment
}

// StartHub starts an API server with the dbfleet CRDs installed and established.
func StartHub() (*Environment, error) {
	return start("hub", []string{CRDDir()}, "", nil)
}

// StartHubWithEtcdDir is StartHub with etcd keeping its data in etcdDataDir, which the caller
// creates and removes: the scale benchmark puts it on tmpfs, so that the figures measure dbfleet
// rather than a shared disk's fsync latency. apiServerFlags are extra kube-apiserver flags
// (name without dashes → value).
func StartHubWithEtcdDir(etcdDataDir string, apiServerFlags map[string]string) (*Environment, error) {
	return start("hub", []string{CRDDir()}, etcdDataDir, apiServerFlags)
}

// StartMember starts a plain API server standing in for a member cluster's control plane. It has
// no controllers, scheduler or nodes: end-to-end tests use the local federation for those.
func StartMember(name string) (*Environment, error) {
	return start(name, nil, "", nil)
}

// quietLogs keeps controller-runtime from printing a stack trace about its unset logger in every
// suite; DBFLEET_TEST_LOGS=1 leaves logging to the suite (which then sets a real logger).
var quietLogs sync.Once

// QuietLogs discards controller-runtime's logs (clients and caches of a suite log through it)
// unless DBFLEET_TEST_LOGS is set. Starting an Environment does it too.
func QuietLogs() {
	quietLogs.Do(func() {
		if os.Getenv("DBFLEET_TEST_LOGS") == "" {
			ctrllog.SetLogger(logr.Discard())
		}
	})
}

func start(name string, crdDirs []string, etcdDataDir string, apiServerFlags map[string]string) (*Environment, error) {
	QuietLogs()
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
		Scheme:                Scheme,
	}
	if etcdDataDir != "" {
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDataDir}
	}
	for flag, value := range apiServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(flag, value)
	}
	// envtest's own output stays quiet unless a test run asks for it.
	if os.Getenv("DBFLEET_TEST_APISERVER_LOGS") != "" {
		env.AttachControlPlaneOutput = true
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start %s API server: %w", name, err)
	}
	// Tests poll; client-go's default 5 QPS would make them wait on the client, not the server.
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("client for %s API server: %w", name, err)
	}
	return &Environment{Name: name, Config: cfg, Client: c, env: env}, nil
}

// UserConfig adds a user authenticated by a client certificate and returns a rest.Config for it.
// The user gets only what RBAC grants it (and whatever its groups are granted).
func (e *Environment) UserConfig(user string, groups ...string) (*rest.Config, error) {
	u, err := e.addUser(user, groups)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

func (e *Environment) addUser(user string, groups []string) (*envtest.AuthenticatedUser, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s to %s: %w", user, e.Name, err)
	}
	return u, nil
}

// Stop stops the API server and its etcd.
func (e *Environment) Stop() error {
	if err := e.env.Stop(); err != nil {
		return fmt.Errorf("stop %s API server: %w", e.Name, err)
	}
	return nil
}

// Kubeconfig returns a kubeconfig for a new user in the given groups, for handing to processes
// or to clients that must not share the admin identity.
func (e *Environment) Kubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := e.addUser(user, groups)
	if err != nil {
		return nil, err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s on %s: %w", user, e.Name, err)
	}
	return kc, nil
}
