package placement

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// eligibility is what a cluster's taints and readiness allow, independent of affinity.
type eligibility uint8

const (
	// eligible clusters may gain replicas.
	eligible eligibility = iota
	// holdOnly clusters keep at most their previous share and gain nothing: they are unready,
	// carry an untolerated NoSchedule taint, or are counting down a NoExecute toleration.
	holdOnly
	// ineligible clusters get nothing: an untolerated or expired NoExecute taint evicts them, and a
	// cluster without a previous share that could only hold gets nothing either.
	ineligible
)

// verdict is the outcome of judgeHealth, with the reason shown when the cluster ends up without
// a share.
type verdict struct {
	why  explID
	elig eligibility
	// evicting is set while a NoExecute toleration counts down: the cluster still holds its
	// share, but it is on its way out and no place for the primary.
	evicting bool
}

// judgeHealth applies Karmada's taint semantics plus readiness. NoExecute wins over NoSchedule,
// which wins over readiness, so the reported reason is the strongest one.
func judgeHealth(c *Cluster, hasPrevious bool, tolerations []corev1.Toleration, now time.Time, texts *taintTexts) verdict {
	if c.Ready && len(c.Taints) == 0 {
		return verdict{elig: eligible}
	}
	var hold verdict
	hold.elig = eligible
	for i := range c.Taints {
		taint := &c.Taints[i]
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated, seconds := noExecuteToleration(taint, tolerations)
		if !tolerated {
			return verdict{elig: ineligible, why: texts.untolerated(taint)}
		}
		if seconds == nil {
			continue // tolerated forever
		}
		added := now // a taint without timeAdded has just been observed: its countdown starts now
		if taint.TimeAdded != nil {
			added = taint.TimeAdded.Time
		}
		deadline := added.Add(time.Duration(*seconds) * time.Second)
		if *seconds <= 0 || !now.Before(deadline) {
			return verdict{elig: ineligible, why: texts.expired(taint, deadline)}
		}
		if hold.elig == eligible {
			hold = verdict{elig: holdOnly, evicting: true, why: texts.evicting(taint, deadline)}
		}
	}
	if hold.elig == eligible {
		for i := range c.Taints {
			taint := &c.Taints[i]
			if taint.Effect == corev1.TaintEffectNoSchedule && !anyTolerates(tolerations, taint) {
				hold = verdict{elig: holdOnly, why: texts.untolerated(taint)}
				break
			}
		}
	}
	if hold.elig == eligible && !c.Ready {
		hold = verdict{elig: holdOnly, why: whyNotReady}
	}
	if hold.elig == holdOnly && !hasPrevious {
		hold.elig = ineligible
	}
	return hold
}

// noExecuteToleration finds whether the taint is tolerated and for how long: the shortest
// tolerationSeconds among the matching tolerations, nil meaning forever (the Kubernetes taint
// manager's rule).
func noExecuteToleration(taint *corev1.Taint, tolerations []corev1.Toleration) (bool, *int64) {
	tolerated := false
	var shortest *int64
	for i := range tolerations {
		t := &tolerations[i]
		if !tolerates(t, taint) {
			continue
		}
		tolerated = true
		if t.TolerationSeconds != nil && (shortest == nil || *t.TolerationSeconds < *shortest) {
			shortest = t.TolerationSeconds
		}
	}
	return tolerated, shortest
}

func anyTolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerates(&tolerations[i], taint) {
			return true
		}
	}
	return false
}

// tolerates is corev1.Toleration.ToleratesTaint without the numeric operators, which cluster
// tolerations do not support (Validate rejects them).
func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	default:
		return false
	}
}

// taintTexts builds the explanation of each distinct taint situation once per decision, so a
// fleet of unreachable clusters shares one instead of allocating one per cluster.
type taintTexts struct {
	whys  *whyTable
	cache map[taintKey]explID
	// last is the situation met most recently: tainted clusters mostly share one, which is then
	// found without hashing the key.
	last   taintKey
	lastID explID
}

type taintKey struct {
	key, value string
	effect     corev1.TaintEffect
	// kind is 0 for an untolerated taint, 1 for an expired toleration, 2 for one counting down
	// to deadline.
	kind     uint8
	deadline time.Time
}

func (t *taintTexts) get(k taintKey, build func() explanation) explID {
	if t.lastID != whyNone && k == t.last {
		return t.lastID
	}
	id, ok := t.cache[k]
	if !ok {
		id = t.whys.add(build())
		t.cache[k] = id
	}
	t.last, t.lastID = k, id
	return id
}

func (t *taintTexts) expired(taint *corev1.Taint, deadline time.Time) explID {
	return t.get(taintKey{taint.Key, taint.Value, taint.Effect, 1, deadline}, func() explanation {
		text := taintText(taint)
		return explanation{taintReason(taint, text), "toleration of " + text + " expired at " + deadline.UTC().Format(time.RFC3339)}
	})
}

func (t *taintTexts) evicting(taint *corev1.Taint, deadline time.Time) explID {
	return t.get(taintKey{taint.Key, taint.Value, taint.Effect, 2, deadline}, func() explanation {
		text := taintText(taint)
		return explanation{taintReason(taint, text), "evicted at " + deadline.UTC().Format(time.RFC3339) + " by " + text + "; gets no new replicas"}
	})
}

func (t *taintTexts) untolerated(taint *corev1.Taint) explID {
	return t.get(taintKey{key: taint.Key, value: taint.Value, effect: taint.Effect}, func() explanation {
		text := taintText(taint)
		return explanation{taintReason(taint, text), "taint " + text + " is not tolerated by clusterTolerations"}
	})
}

// taintReason is the reason of an exclusion by the taint, whose taintText is text.
func taintReason(taint *corev1.Taint, text string) string {
	switch taint.Key {
	case v1alpha1.TaintClusterUnreachable:
		return ReasonUnreachable
	case v1alpha1.TaintClusterNotReady:
		return ReasonNotReadyTaint
	}
	return "untolerated taint " + text
}

// taintText is taint.ToString() ("key=value:effect", leaving out "=value" without a value and
// ":effect" without either) put together without fmt, which allocates for every argument:
// messages are built in every decision.
func taintText(taint *corev1.Taint) string {
	switch {
	case taint.Value != "":
		return taint.Key + "=" + taint.Value + ":" + string(taint.Effect)
	case taint.Effect != "":
		return taint.Key + ":" + string(taint.Effect)
	default:
		return taint.Key
	}
}
