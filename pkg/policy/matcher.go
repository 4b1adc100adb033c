package policy

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// sweepEvery is how many Select calls an unused policy's parsed selectors survive, at least.
const sweepEvery = 4096

// Matcher keeps each policy's parsed label selectors, keyed by UID and generation, so that
// binding a DatabaseCluster does not parse every policy's selectors again. At 400 policies that
// parsing (label key validation by regular expression) was a fifth of the hub's CPU while it
// placed new databases. The zero Matcher is ready to use and safe for concurrent use.
//
// Entries not used for sweepEvery calls are dropped, which bounds the cache after policies are
// deleted without the Matcher having to watch them.
type Matcher struct {
	mu      sync.Mutex
	calls   int
	current map[types.UID]parsed
	// previous holds the entries of the last period; an entry used again moves back to current.
	previous map[types.UID]parsed
}

type parsed struct {
	generation int64
	selectors  []labels.Selector
}

// age counts a Select call and ages the cache every sweepEvery calls. The caller holds m's lock.
func (m *Matcher) age() {
	m.calls++
	if m.calls%sweepEvery == 0 {
		m.previous, m.current = m.current, nil
	}
}

// selectors returns spec's resource selectors parsed, index for index: nil for a selector
// without a labelSelector, labels.Nothing() for one labels cannot parse. The CRDs refuse such
// selectors at admission, so only a policy stored before they did can have one; it selects
// nothing. The caller holds m's lock.
func (m *Matcher) selectors(obj *metav1.ObjectMeta, spec *dbfleetv1alpha1.PropagationSpec) []labels.Selector {
	if m == nil || obj.UID == "" {
		return parse(spec)
	}
	if p, ok := m.current[obj.UID]; ok && p.generation == obj.Generation {
		return p.selectors
	}
	p, ok := m.previous[obj.UID]
	if !ok || p.generation != obj.Generation {
		p = parsed{generation: obj.Generation, selectors: parse(spec)}
	}
	if m.current == nil {
		m.current = map[types.UID]parsed{}
	}
	m.current[obj.UID] = p
	return p.selectors
}

func parse(spec *dbfleetv1alpha1.PropagationSpec) []labels.Selector {
	out := make([]labels.Selector, len(spec.ResourceSelectors))
	for i, sel := range spec.ResourceSelectors {
		if sel.LabelSelector == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(sel.LabelSelector)
		if err != nil {
			s = labels.Nothing()
		}
		out[i] = s
	}
	return out
}
