package resourcesummary

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Summarize adds up the member's capacity in Karmada's shape: the allocatable resources of its
// schedulable Ready Nodes, and the requests of the Pods scheduled onto them that still run.
func Summarize(ctx context.Context, member client.Reader) (*dbfleetv1alpha1.ResourceSummary, error) {
	nodes := &corev1.NodeList{}
	if err := member.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list member Nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods); err != nil {
		return nil, fmt.Errorf("list member Pods: %w", err)
	}
	summary := &dbfleetv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{}, Allocated: corev1.ResourceList{}}
	usable := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		usable[n.Name] = true
		add(summary.Allocatable, n.Status.Allocatable)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !usable[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			add(summary.Allocated, c.Resources.Requests)
		}
	}
	return summary, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func add(into, from corev1.ResourceList) {
	for name, q := range from {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}
