package member

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// annotateInstancePods writes specs.InstanceAnnotations onto the share's pods, leaving others'
// annotations alone.
func annotateInstancePods(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase) error {
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods, client.InNamespace(mdb.Spec.DatabaseRef.Namespace), client.MatchingLabels(specs.SelectorLabels(mdb))); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	want := specs.InstanceAnnotations(mdb, pods.Items)
	for i := range pods.Items {
		pod := &pods.Items[i]
		w, ok := want[pod.Name]
		if !ok {
			continue
		}
		changed := false
		for k, v := range w {
			if pod.Annotations[k] != v {
				changed = true
			}
		}
		if !changed {
			continue
		}
		patched := pod.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		maps.Copy(patched.Annotations, w)
		if err := member.Patch(ctx, patched, client.MergeFrom(pod)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("annotate pod %s: %w", pod.Name, err)
		}
	}
	return nil
}
