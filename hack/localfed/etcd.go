package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// One etcd serves every API server of the federation, each under its own --etcd-prefix.

func etcdComponent(d stateDir, bin string, clientPort, peerPort int) Component {
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	return Component{Name: "etcd", Args: []string{bin,
		"--name=localfed",
		"--data-dir=" + d.path("etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=localfed=" + peer,
		"--unsafe-no-fsync", // throwaway data: spare the disk
		"--log-level=warn",
	}}
}

// etcdHealthy asks etcd's /health endpoint.
func etcdHealthy(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("/health: %s %s", resp.Status, body)
		}
		return nil
	}
}

func (f *fed) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	f.st.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	r, err := f.launch(etcdComponent(f.dir, f.bins.etcd, clientPort, peerPort))
	if err != nil {
		return err
	}
	if err := waitReady(ctx, "etcd", 30*time.Second, etcdHealthy(f.st.EtcdURL), r); err != nil {
		return err
	}
	say("etcd: ready on %s", f.st.EtcdURL)
	return nil
}
