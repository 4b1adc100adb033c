package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A kube-apiserver per cluster (the hub and each member), all on the one etcd under
// --etcd-prefix=/<cluster>, on 127.0.0.1 and a free port.

func apiserverComponent(bin, etcdURL, cluster string, port int, p clusterPKI) Component {
	return Component{Name: "apiserver-" + cluster, Args: []string{bin,
		"--etcd-servers=" + etcdURL,
		"--etcd-prefix=/" + cluster,
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--cert-dir=" + p.certDir(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--authorization-mode=RBAC",
		"--token-auth-file=" + p.tokenFile,
		"--service-cluster-ip-range=10.96.0.0/24",
	}}
}

// startAPIServer starts the API server of a cluster, writes its admin kubeconfig once the server
// generated its certificate, and waits for /readyz.
func (f *fed) startAPIServer(ctx context.Context, cluster string, port int) error {
	p, err := newPKI(f.dir.pki(cluster))
	if err != nil {
		return fmt.Errorf("apiserver-%s: keys: %w", cluster, err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	f.mu.Lock()
	f.st.Servers[cluster] = server
	f.mu.Unlock()
	r, err := f.launch(apiserverComponent(f.bins.apiserver, f.st.EtcdURL, cluster, port, p))
	if err != nil {
		return err
	}
	kubeconfig := f.dir.kubeconfig(cluster)
	var cs *kubernetes.Clientset
	err = waitReady(ctx, r.name, 3*time.Minute, func(ctx context.Context) error {
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
	if err != nil {
		return err
	}
	say("apiserver-%s: ready on %s, kubeconfig %s", cluster, server, rel(kubeconfig))
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
