package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// With --nodes kwok each member gets --nodes-per-member fake Nodes that kwok manages (it selects
// them by annotation), labelled with the member's region and zone, each with room for a few
// databases.

const fakeNodeAnnotation = "kwok.x-k8s.io/node"

func fakeNode(m layout.Member, i int) *corev1.Node {
	name := fmt.Sprintf("%s-node-%d", m.Name, i)
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"type":                          "kwok",
				"topology.kubernetes.io/region": m.Region,
				"topology.kubernetes.io/zone":   m.Zone,
			},
			Annotations: map[string]string{fakeNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}
}

// createNodes creates the member's fake Nodes with their capacity (a kubelet registers its Node
// the same way, status included).
func createNodes(ctx context.Context, cs kubernetes.Interface, m layout.Member, count int) error {
	for i := range count {
		want := fakeNode(m, i)
		got, err := cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return err
		}
		if got.Status.Allocatable.Cpu().IsZero() { // in case the server dropped the status on create
			got.Status.Capacity, got.Status.Allocatable = want.Status.Capacity, want.Status.Allocatable
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodesSchedulable succeeds once count Nodes are registered, every one Ready and carrying no
// NoSchedule or NoExecute taint (the node lifecycle controller removes node.kubernetes.io/not-ready
// once the kubelet, or kwok, reports Ready).
func nodesSchedulable(cs kubernetes.Interface, count int) func(context.Context) error {
	return func(ctx context.Context) error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				return fmt.Errorf("node %s is not Ready yet", n.Name)
			}
			for _, t := range n.Spec.Taints {
				if t.Effect != corev1.TaintEffectPreferNoSchedule {
					return fmt.Errorf("node %s still has taint %s:%s (kube-controller-manager lifts it)", n.Name, t.Key, t.Effect)
				}
			}
		}
		if len(nodes.Items) < count {
			return fmt.Errorf("%d of %d nodes registered", len(nodes.Items), count)
		}
		return nil
	}
}
