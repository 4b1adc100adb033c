package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// The demo drives the federation only through bin/localfed (up, stop, start, down) and reads what
// it needs from its state directory; it never signals a process itself.

// fed is the federation's state directory (make demo runs at the repository root), stateDir its
// name in messages.
const (
	fed      = layout.Dir(layout.DefaultDir)
	stateDir = layout.DefaultDir
)

// federation is a running local federation and clients for its clusters.
type federation struct {
	members                      []string
	grace, heartbeat, fenceAfter time.Duration
	hub                          client.Client
	clusters                     map[string]kubernetes.Interface
	startedByUs                  bool
}

func localfed(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "bin/localfed", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Interrupted, localfed stops what it started; give it the time to.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	return cmd.Run()
}

// ensureFederation reuses a running federation or brings one up.
func ensureFederation(ctx context.Context) (*federation, error) {
	if _, err := os.Stat(stateDir); err == nil {
		// localfed status: 0 all running, 3 nothing running (up cleans that up), else partly running.
		status := exec.CommandContext(ctx, "bin/localfed", "status")
		out, err := status.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			say("A local federation is already running (%s): the demo uses it and leaves it running.", stateDir)
			return openFederation(false)
		case errors.As(err, &exit) && exit.ExitCode() == 3:
		default:
			return nil, fmt.Errorf("a federation exists in %s but not all of it runs:\n%s\nstop it with 'make localfed-down' and run the demo again", stateDir, out)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	para("Bringing up a local federation: one etcd, a hub API server running `hub run`, and three member clusters " +
		"(each a real kube-apiserver, controller manager and scheduler, and a real node: kubelet, containerd and runc " +
		"on a bridge of its own, pod IPs routed between members), each joined with `hub join` and served by its " +
		"agent. This takes a minute or so.")
	fmt.Println()
	if err := localfed(ctx, "up"); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the local federation did not come up (see above)")
	}
	fmt.Println()
	return openFederation(true)
}

func openFederation(startedByUs bool) (*federation, error) {
	st, err := fed.Load()
	if err != nil {
		return nil, err
	}
	f := &federation{startedByUs: startedByUs, clusters: map[string]kubernetes.Interface{}}
	for _, d := range []struct {
		s   string
		out *time.Duration
	}{{st.GracePeriod, &f.grace}, {st.HeartbeatInterval, &f.heartbeat}, {st.FenceAfter, &f.fenceAfter}} {
		if *d.out, err = time.ParseDuration(d.s); err != nil {
			return nil, fmt.Errorf("%s/state.json: %w", stateDir, err)
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := dbfleetv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig(layout.HubCluster))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, -1
	if f.hub, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	for _, m := range st.Members {
		f.members = append(f.members, m.Name)
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig(m.Name))
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst, cfg.Timeout = -1, -1, 3*time.Second
		if f.clusters[m.Name], err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func kubeconfig(cluster string) string { return fed.Kubeconfig(cluster) }

func pidFile(component string) string { return fed.PidFile(component) }

func logFile(component string) string { return fed.LogFile(component) }
