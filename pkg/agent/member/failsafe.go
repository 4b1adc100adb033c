package member

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// failsafeReadBudget bounds onFailsafe: two reads of the instance's /status.
const failsafeReadBudget = 2*instanceStatusTimeout + 500*time.Millisecond

// onFailsafe says the share's primary instance answers, now, that it hears every standby of its
// membership at the share's epoch: it takes writes on its failsafe (its Lease can no longer be
// renewed), or will the moment its Lease runs out, which falls at about the agent's own deadline
// (both count fenceAfter from the same hub renewal). The agent then does not fence it (the pod
// relabelled fenced would stop it): the instance stops on its own, before a standby may promote,
// should one fall silent (docs/failover.md, "Failsafe and promotion from silence"), and the
// agent asks again within failsafeRecheck. Read afresh, not from the last pass. Any doubt (no
// answer, another epoch, an instance without the failsafe, which reports none) says no, and the
// agent fences as before.
func (r *Reconciler) onFailsafe(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase) bool {
	if !r.instanceManaged(mdb) {
		return false
	}
	// On a budget of its own: the answer decides a fence, and a lapse recorded for good, and a
	// pass whose deadline the member API server used up (its writes hanging while it stopped or
	// came back) asked with none left and fenced a primary on its failsafe (the end-to-end suite,
	// the member API server stopped: 75 s without a write).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failsafeReadBudget)
	defer cancel()
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods, client.InNamespace(mdb.Spec.DatabaseRef.Namespace), client.MatchingLabels(specs.SelectorLabels(mdb))); err != nil {
		return false
	}
	c := r.statusClients.get(ctx, member, mdb)
	for _, t := range instanceTargets(mdb, pods.Items) {
		if role, err := specs.PodRole(mdb, t.pod, false); err != nil || role != contract.PodRolePrimary || t.url == "" {
			continue
		}
		in, err := readInstance(ctx, c, t.url, r.now)
		if err != nil && ctx.Err() == nil {
			in, err = readInstance(ctx, c, t.url, r.now) // once more: one lost answer is no proof
		}
		ok := err == nil && in.Role == dbfleetv1alpha1.InstanceRunningPrimary && in.Epoch == mdb.Spec.Epoch &&
			in.Failsafe != nil && (in.Failsafe.Active || len(in.Failsafe.Unheard) == 0)
		if ok {
			ctrl.LoggerFrom(ctx).V(1).Info("Not fencing: the primary takes writes on its failsafe", "pod", t.pod, "members", in.Failsafe.Members)
		}
		return ok
	}
	return false
}
