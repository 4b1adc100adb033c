package main

import (
	"context"
	"os"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// One etcd serves every API server of the federation, each under its own --etcd-prefix.

func etcdComponent(d layout.Dir, bin string, clientPort, peerPort *process.Port) layout.Component {
	client := "http://" + clientPort.Addr()
	peer := "http://" + peerPort.Addr()
	return layout.Component{Name: layout.Etcd, Args: []string{bin,
		"--name=localfed",
		"--data-dir=" + d.EtcdData(),
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
func etcdHealthy(url string) process.Probe {
	return process.HTTPOK(url+"/health", `"health":"true"`)
}

// startEtcd starts etcd on two fresh ports and waits for its /health, again on other ports when
// one was taken.
func (f *fed) startEtcd(ctx context.Context) error {
	err := process.RetryOnPortConflict(portAttempts, func() error {
		ports, err := process.ReservePorts(2)
		if err != nil {
			return err
		}
		// A start that failed may have left data naming its ports: begin afresh.
		if err := os.RemoveAll(f.dir.EtcdData()); err != nil {
			process.ReleaseAll(ports)
			return err
		}
		if err := os.MkdirAll(f.dir.EtcdData(), 0o700); err != nil {
			process.ReleaseAll(ports)
			return err
		}
		f.st.EtcdURL = "http://" + ports[0].Addr()
		r, err := f.launch(etcdComponent(f.dir, f.bins.etcd, ports[0], ports[1]), ports...)
		if err != nil {
			return err
		}
		return waitReady(ctx, layout.Etcd, 30*time.Second, etcdHealthy(f.st.EtcdURL), r)
	})
	if err != nil {
		return err
	}
	say("etcd: ready on %s", f.st.EtcdURL)
	return nil
}
