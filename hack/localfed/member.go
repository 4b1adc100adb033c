package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// A member's control plane besides its API server: kube-controller-manager with the default
// controllers (nodelifecycle lifts the fake Nodes' not-ready taint; statefulset, the PV binder and
// garbage collection run the agent's objects), kube-scheduler, and kwok, which plays the kubelet
// of the fake Nodes (Ready, heartbeats) and of their Pods (Running, Ready). None serves a port.

func controllerManagerComponent(bin, member, kubeconfig string, p clusterPKI) layout.Component {
	return layout.Component{Name: layout.ControllerManager(member), Args: []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--service-account-private-key-file=" + p.saKey,
		"--root-ca-file=" + p.servingCert(),
		"--use-service-account-credentials=false",
	}}
}

func schedulerComponent(bin, member, kubeconfig string) layout.Component {
	return layout.Component{Name: layout.Scheduler(member), Args: []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}}
}

func kwokComponent(bin, stages, member, kubeconfig string) layout.Component {
	return layout.Component{Name: layout.Kwok(member), Args: []string{bin,
		"--kubeconfig=" + kubeconfig,
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + fakeNodeAnnotation + "=fake",
		"--cidr=10.0.0.1/24",
		"--node-ip=10.0.0.1",
	}}
}

// startMemberControlPlane starts the controllers, scheduler and kwok (or the real nodes) of a
// member whose API server is ready, creates its volumes and waits until the Nodes take Pods.
func (f *fed) startMemberControlPlane(ctx context.Context, m layout.Member) error {
	kubeconfig := f.dir.Kubeconfig(m.Name)
	p := clusterPKI{dir: f.dir.PKI(m.Name)}
	p.saKey = p.dir + "/sa.key"
	components := []layout.Component{
		controllerManagerComponent(f.bins.controllerManager, m.Name, kubeconfig, p),
		schedulerComponent(f.bins.scheduler, m.Name, kubeconfig),
	}
	if f.st.NodeKind == realNodes {
		return f.startRealMember(ctx, m, components)
	}
	components = append(components, kwokComponent(f.bins.kwok, f.bins.kwokStages, m.Name, kubeconfig))
	var procs []*process.Process
	for _, c := range components {
		r, err := f.launch(c)
		if err != nil {
			return err
		}
		procs = append(procs, r)
	}
	cs, err := clientFor(kubeconfig)
	if err != nil {
		return err
	}
	if err := createNodes(ctx, cs, m, f.nodesPerMember); err != nil {
		return fmt.Errorf("%s: fake Nodes: %w", m.Name, err)
	}
	if err := createVolumes(ctx, cs, m, f.volumes); err != nil {
		return fmt.Errorf("%s: volumes: %w", m.Name, err)
	}
	// The Nodes are usable once kwok reports them Ready and the node lifecycle controller lifts
	// their not-ready taint; a crash of any of the three processes fails the wait at once.
	if err := waitReady(ctx, m.Name+"'s fake Nodes", 2*time.Minute, nodesSchedulable(cs, f.nodesPerMember), procs...); err != nil {
		return err
	}
	say("%s: %d fake Nodes Ready and schedulable (%s/%s), %d volumes", m.Name, f.nodesPerMember, m.Region, m.Zone, f.volumes)
	return nil
}

// hubSite labels the hub cluster's node (--hub-node) as a member's region and zone label theirs.
var hubSite = layout.Member{Name: layout.HubCluster, Region: "hub", Zone: "hub-a"}

// startHubControlPlane gives the hub cluster what a member has (--hub-node): a controller manager
// (Deployments, ReplicaSets, the root CA ConfigMap the pods' service-account volumes mount), a
// scheduler and a real node with the hub image, so the hub runs there as pods. Its pods reach the
// hub API server through the `kubernetes` Service as members' pods reach theirs (network.go).
func (f *fed) startHubControlPlane(ctx context.Context) error {
	kubeconfig := f.dir.Kubeconfig(layout.HubCluster)
	p := clusterPKI{dir: f.dir.PKI(layout.HubCluster)}
	p.saKey = p.dir + "/sa.key"
	return f.startRealMember(ctx, hubSite, []layout.Component{
		controllerManagerComponent(f.bins.controllerManager, layout.HubCluster, kubeconfig, p),
		schedulerComponent(f.bins.scheduler, layout.HubCluster, kubeconfig),
	})
}
