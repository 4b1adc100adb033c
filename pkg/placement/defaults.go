package placement

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// DefaultTolerationSeconds is how long a placement tolerates the hub's dbfleet.io/unreachable and
// dbfleet.io/not-ready NoExecute taints when it says nothing about them (docs/placement.md,
// "Taints, tolerations and readiness"). Karmada defaults the same two tolerations, at 300 s.
const DefaultTolerationSeconds = 10

// EffectiveTolerations is the placement's clusterTolerations plus a toleration of each of the
// hub's health taints that none of them already tolerates, for defaultSeconds (the hub's
// --default-unreachable-toleration). Schedule uses these; a caller predicting evictions
// (NextEviction) gets the same answer.
func EffectiveTolerations(tolerations []corev1.Toleration, defaultSeconds int64) []corev1.Toleration {
	out := tolerations
	for _, key := range []string{v1alpha1.TaintClusterUnreachable, v1alpha1.TaintClusterNotReady} {
		taint := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute}
		if anyTolerates(tolerations, &taint) {
			continue
		}
		if len(out) == len(tolerations) {
			out = append(make([]corev1.Toleration, 0, len(tolerations)+2), tolerations...)
		}
		seconds := defaultSeconds
		out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds})
	}
	return out
}

// NextEviction is the earliest moment after in.Now at which a NoExecute toleration of
// in.Placement runs out on one of in.Clusters, changing what Schedule decides; false when none is
// counting down. The hub requeues for it so evictions happen on time.
func NextEviction(in *Input) (time.Time, bool) {
	tolerations := EffectiveTolerations(in.Placement.ClusterTolerations, in.defaultToleration())
	var next time.Time
	found := false
	for i := range in.Clusters {
		for j := range in.Clusters[i].Taints {
			taint := &in.Clusters[i].Taints[j]
			if taint.Effect != corev1.TaintEffectNoExecute || taint.TimeAdded == nil {
				continue // without timeAdded the countdown restarts at every decision
			}
			tolerated, seconds := noExecuteToleration(taint, tolerations)
			if !tolerated || seconds == nil {
				continue
			}
			deadline := taint.TimeAdded.Add(time.Duration(*seconds) * time.Second)
			if deadline.After(in.Now) && (!found || deadline.Before(next)) {
				next, found = deadline, true
			}
		}
	}
	return next, found
}

// defaultToleration is in.DefaultTolerationSeconds, or DefaultTolerationSeconds when unset.
func (in *Input) defaultToleration() int64 {
	if in.DefaultTolerationSeconds != nil {
		return *in.DefaultTolerationSeconds
	}
	return DefaultTolerationSeconds
}
