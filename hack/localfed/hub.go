package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
	joinpkg "github.com/dbfleet/dbfleet/pkg/join"
)

// Wiring dbfleet onto the clusters: the CRDs on the hub, `hub run`, then for each member
// `hub join`, the join manifests applied to the member with kubectl, and the agent as a local
// process with the credential from those manifests.

// kubectl runs kubectl, returning its combined output in the error.
func kubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// installCRDs applies deploy/crds to the hub and waits until they are served, and the hub's
// admission policy.
func (f *fed) installCRDs(ctx context.Context) error {
	hub := f.dir.Kubeconfig(layout.HubCluster)
	if err := kubectl(ctx, "--kubeconfig", hub, "apply", "--server-side", "-k", f.bins.crds); err != nil {
		return fmt.Errorf("install the CRDs: %w", err)
	}
	// deploy/crds/dbfleet.io_<plural>.yaml holds CRD <plural>.dbfleet.io.
	files, err := filepath.Glob(filepath.Join(f.bins.crds, "dbfleet.io_*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", f.bins.crds)
	}
	wait := []string{"--kubeconfig", hub, "wait", "--for=condition=Established", "--timeout=60s"}
	for _, file := range files {
		plural := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "dbfleet.io_"), ".yaml")
		wait = append(wait, "crd/"+plural+".dbfleet.io")
	}
	if err := kubectl(ctx, wait...); err != nil {
		return fmt.Errorf("wait for the CRDs: %w", err)
	}
	// The hub install's admission policy too (deploy/hub/admission.yaml, beside deploy/crds):
	// no DatabaseCluster in a namespace that may hold none.
	admission := filepath.Join(filepath.Dir(f.bins.crds), "hub", "admission.yaml")
	if err := kubectl(ctx, "--kubeconfig", hub, "apply", "--server-side", "-f", admission); err != nil {
		return fmt.Errorf("install the hub's admission policy: %w", err)
	}
	say("hub: CRDs installed from %s, admission policy from %s", rel(f.bins.crds), rel(admission))
	return nil
}

// startHub runs `hub run` with its metrics and probes on fresh ports (others when one was taken)
// and waits for its /readyz.
func (f *fed) startHub(ctx context.Context) error {
	err := process.RetryOnPortConflict(portAttempts, func() error {
		ports, err := process.ReservePorts(2)
		if err != nil {
			return err
		}
		f.st.HubMetrics, f.st.HubHealth = ports[0].Addr(), ports[1].Addr()
		r, err := f.launch(layout.Component{Name: layout.Hub, Args: []string{f.bins.hub, "run",
			"--kubeconfig", f.dir.Kubeconfig(layout.HubCluster),
			"--leader-elect=false",
			"--cluster-grace-period", f.st.GracePeriod,
			"--metrics-bind-address", f.st.HubMetrics,
			"--health-probe-bind-address", f.st.HubHealth,
		}}, ports...)
		if err != nil {
			return err
		}
		return waitReady(ctx, layout.Hub, time.Minute, process.HTTPOK("http://"+f.st.HubHealth+"/readyz"), r)
	})
	if err != nil {
		return err
	}
	say("hub: running (cluster grace period %s), metrics http://%s/metrics", f.st.GracePeriod, f.st.HubMetrics)
	return nil
}

// joinMember runs `hub join`, applies the manifests to the member and starts its agent.
func (f *fed) joinMember(ctx context.Context, m layout.Member) error {
	manifests := f.dir.AgentManifests(m.Name)
	join := exec.CommandContext(ctx, f.bins.hub, "join", m.Name, "--region", m.Region, "--zone", m.Zone,
		"--kubeconfig", f.dir.Kubeconfig(layout.HubCluster),
		"--heartbeat-interval", f.st.HeartbeatInterval, "--fence-after", f.st.FenceAfter,
		"-o", manifests)
	out, err := join.CombinedOutput()
	if logErr := os.WriteFile(f.dir.JoinLog(m.Name), out, 0o600); logErr != nil {
		return logErr
	}
	if err != nil {
		return fmt.Errorf("hub join %s: %w; its output (%s):\n%s", m.Name, err, rel(f.dir.JoinLog(m.Name)), process.Tail(f.dir.JoinLog(m.Name), 15))
	}
	if err := kubectl(ctx, "--kubeconfig", f.dir.Kubeconfig(m.Name), "apply", "-f", manifests); err != nil {
		return fmt.Errorf("%s: apply the agent manifests: %w", m.Name, err)
	}
	// The agent runs here as a local process (below), not as the manifests' Deployment: two agents
	// would fight over the member. The Deployment stays, scaled to 0, as a user would find it.
	if err := kubectl(ctx, "--kubeconfig", f.dir.Kubeconfig(m.Name), "-n", joinpkg.SystemNamespace, "scale", "deployment/"+joinpkg.AgentName, "--replicas=0"); err != nil {
		return fmt.Errorf("%s: scale the agent Deployment to 0 (the agent runs as a local process): %w", m.Name, err)
	}
	hubKubeconfig, err := agentCredential(manifests)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if err := os.WriteFile(f.dir.AgentHubKubeconfig(m.Name), hubKubeconfig, 0o600); err != nil {
		return err
	}
	if err := f.agentMemberCredential(ctx, m.Name); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	say("%s: joined (hub join, manifests %s applied to the member with kubectl; the agent runs as its ServiceAccount)", m.Name, rel(manifests))
	return process.RetryOnPortConflict(portAttempts, func() error {
		port, err := process.ReservePort()
		if err != nil {
			return err
		}
		health := port.Addr()
		f.mu.Lock()
		f.st.AgentHealth[m.Name] = health
		f.mu.Unlock()
		args := []string{f.bins.agent,
			"--cluster-name", m.Name,
			"--hub-kubeconfig", f.dir.AgentHubKubeconfig(m.Name),
			"--kubeconfig", f.dir.AgentMemberKubeconfig(m.Name),
			"--heartbeat-interval", f.st.HeartbeatInterval,
			"--fence-after", f.st.FenceAfter,
			"--metrics-bind-address", "0",
			"--health-probe-bind-address", health,
		}
		if f.st.NodeKind == realNodes {
			// postgres pods run dbfleet-instance from the agent image imported into every node.
			args = append(args, "--instance-image", agentImage)
		}
		r, err := f.launch(layout.Component{Name: layout.Agent(m.Name), Args: args, Group: f.agentGroup(m.Name)}, port)
		if err != nil {
			return err
		}
		return waitReady(ctx, layout.Agent(m.Name), time.Minute, process.HTTPOK("http://"+health+"/readyz"), r)
	})
}

// agentTokenLifetime is how long the local agent's member token lasts: a local federation lives
// for a demo or a test run (the Deployment's pod would get a token the kubelet renews).
const agentTokenLifetime = 30 * 24 * time.Hour

// agentMemberCredential writes the kubeconfig the local agent process uses in its member: the
// member's API server with a token of the agent's ServiceAccount (TokenRequest), so the agent
// runs with exactly the rights join's manifests give it (its ClusterRole and admission policy),
// as the Deployment's pod would, and not as the member's admin.
func (f *fed) agentMemberCredential(ctx context.Context, member string) error {
	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", f.dir.Kubeconfig(member), "-n", joinpkg.SystemNamespace,
		"create", "token", joinpkg.AgentName, "--duration", agentTokenLifetime.String()).Output()
	if err != nil {
		return fmt.Errorf("a token for the agent's ServiceAccount: %w", err)
	}
	cfg, err := clientcmd.LoadFromFile(f.dir.Kubeconfig(member))
	if err != nil {
		return err
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: strings.TrimSpace(string(out))}
	}
	return clientcmd.WriteToFile(*cfg, f.dir.AgentMemberKubeconfig(member))
}

// agentCredential is the hub kubeconfig in the join manifests' Secret, the one the agent's
// Deployment would mount.
func agentCredential(manifests string) ([]byte, error) {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", manifests, err)
		}
		var secret corev1.Secret
		if err := yaml.Unmarshal(doc, &secret); err != nil || secret.Kind != "Secret" {
			continue
		}
		if kc, ok := secret.Data[joinpkg.KubeconfigKey]; ok {
			return kc, nil
		}
		if kc, ok := secret.StringData[joinpkg.KubeconfigKey]; ok {
			return []byte(kc), nil
		}
	}
	return nil, fmt.Errorf("%s holds no Secret with a kubeconfig key", manifests)
}

// membersReady succeeds once every member's MemberCluster is Ready=True on the hub.
func (f *fed) membersReady() (func(context.Context) error, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.dir.Kubeconfig(layout.HubCluster))
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := dbfleetv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		var notReady []string
		for _, m := range f.st.Members {
			mc := &dbfleetv1alpha1.MemberCluster{}
			if err := c.Get(ctx, client.ObjectKey{Name: m.Name}, mc); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) {
				notReady = append(notReady, m.Name)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("MemberCluster not Ready yet: %s", strings.Join(notReady, ", "))
		}
		return nil
	}, nil
}
