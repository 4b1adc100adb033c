package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// A kube-apiserver per cluster (the hub and each member), all on the one etcd under
// --etcd-prefix=/<cluster>, on 127.0.0.1 and a free port.
//

// A member with real nodes has its API server on its first node's bridge address instead, where
// the node's pods reach it (network.go) and from where it reaches the kubelets, with a client
// certificate they trust.
func apiserverComponent(bin, etcdURL, cluster, address string, port *process.Port, p clusterPKI, realNodes bool) layout.Component {
	c := layout.Component{Name: layout.APIServer(cluster), Args: []string{bin,
		"--etcd-servers=" + etcdURL,
		"--etcd-prefix=/" + cluster,
		"--secure-port=" + port.String(),
		"--bind-address=" + address,
		"--advertise-address=" + address,
		"--cert-dir=" + p.certDir(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--authorization-mode=RBAC",
		"--token-auth-file=" + p.tokenFile,
		"--service-cluster-ip-range=10.96.0.0/24",
	}}
	if realNodes {
		c.Args = append(c.Args,
			"--kubelet-client-certificate="+p.kubeletClientCert(),
			"--kubelet-client-key="+p.kubeletClientKey(),
			// Node names do not resolve here: reach kubelets at their node IPs.
			"--kubelet-preferred-address-types=InternalIP")
	}
	return c
}

// startAPIServer starts the API server of a cluster on a fresh port (another when that one was
// taken), writes its admin kubeconfig once the server generated its certificate, and waits for
// /readyz.
func (f *fed) startAPIServer(ctx context.Context, cluster string) error {
	p, err := newPKI(f.dir.PKI(cluster))
	if err != nil {
		return fmt.Errorf("%s: keys: %w", layout.APIServer(cluster), err)
	}
	kubeconfig := f.dir.Kubeconfig(cluster)
	address, realNodes := "127.0.0.1", false
	if nodes := f.st.NodesOf(cluster); len(nodes) > 0 {
		address, realNodes = nodes[0].IP, true
		if err := p.writeKubeletClientCerts(); err != nil {
			return fmt.Errorf("%s: kubelet client certificate: %w", layout.APIServer(cluster), err)
		}
	}
	var server string
	err = process.RetryOnPortConflict(portAttempts, func() error {
		port, err := process.ReservePort()
		if err != nil {
			return err
		}
		server = "https://" + net.JoinHostPort(address, port.String())
		f.mu.Lock()
		f.st.Servers[cluster] = server
		f.mu.Unlock()
		r, err := f.launch(apiserverComponent(f.bins.apiserver, f.st.EtcdURL, cluster, address, port, p, realNodes), port)
		if err != nil {
			return err
		}
		var cs *kubernetes.Clientset
		return waitReady(ctx, r.Name(), 3*time.Minute, func(ctx context.Context) error {
			if cs == nil {
				if _, err := os.Stat(p.servingCert()); err != nil {
					return errors.New("no serving certificate generated yet")
				}
				if err := writeKubeconfig(kubeconfig, cluster, server, p); err != nil {
					return err
				}
				c, err := clientFor(kubeconfig)
				if err != nil {
					return err
				}
				cs = c
			}
			body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("/readyz: %v %s", err, body)
			}
			return nil
		}, r)
	})
	if err != nil {
		return err
	}
	say("%s: ready on %s, kubeconfig %s", layout.APIServer(cluster), server, rel(kubeconfig))
	return nil
}

// clientFor is a clientset for a kubeconfig, with client-side rate limits lifted (setup makes
// many quick calls).
func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, -1
	return kubernetes.NewForConfig(cfg)
}
