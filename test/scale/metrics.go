package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

type families map[string]*dto.MetricFamily

func parseMetrics(data []byte) (families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

// httpMetrics reads a controller manager's metrics endpoint.
func httpMetrics(ctx context.Context, url string) (families, error) {
	return httpMetricsWith(ctx, http.DefaultClient, url)
}

// httpMetricsWith reads a Prometheus endpoint with the given client.
func httpMetricsWith(ctx context.Context, hc *http.Client, url string) (families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(data)
}

// sum adds the counter, gauge and untyped values of every series of name whose labels include want.
func (f families) sum(name string, want map[string]string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	var total float64
series:
	for _, m := range fam.GetMetric() {
		for k, v := range want {
			if label(m, k) != v {
				continue series
			}
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return total
}

// observations counts the observations of histogram name, over all its series.
func (f families) observations(name string) float64 {
	var total float64
	for _, m := range f[name].GetMetric() {
		total += float64(m.GetHistogram().GetSampleCount())
	}
	return total
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// requestCounts are apiserver_request_total by "VERB resource[/subresource]".
type requestCounts map[string]float64

func (f families) requests() requestCounts {
	out := requestCounts{}
	fam := f["apiserver_request_total"]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		res := label(m, "resource")
		if sub := label(m, "subresource"); sub != "" {
			res += "/" + sub
		}
		if res == "" {
			res = "(non-resource)"
		}
		out[label(m, "verb")+" "+res] += m.GetCounter().GetValue()
	}
	return out
}

// rates turns two request counts into per-second rates, the busiest first.
func rates(before, after requestCounts, d time.Duration) []RequestRate {
	var out []RequestRate
	for k, v := range after {
		delta := v - before[k]
		if delta <= 0 {
			continue
		}
		verb, res, _ := strings.Cut(k, " ")
		out = append(out, RequestRate{Verb: verb, Resource: res, Count: int64(delta), PerSecond: delta / d.Seconds()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Verb+out[i].Resource < out[j].Verb+out[j].Resource
	})
	return out
}

// isWrite says whether a verb changes state.
func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// writesTo adds up the writes among rates to resources with the given prefix (a resource, or a
// resource and its subresources).
func writesTo(rs []RequestRate, resource string) int64 {
	var n int64
	for _, r := range rs {
		if isWrite(r.Verb) && (r.Resource == resource || strings.HasPrefix(r.Resource, resource+"/")) {
			n += r.Count
		}
	}
	return n
}

// closedWatches is, by resource, how many watches the API server closed between before and after
// because their clients did not keep up with the events.
func closedWatches(before, after families) map[string]int {
	count := func(f families) map[string]float64 {
		out := map[string]float64{}
		for _, m := range f["apiserver_terminated_watchers_total"].GetMetric() {
			out[label(m, "resource")] += m.GetCounter().GetValue()
		}
		return out
	}
	was, now := count(before), count(after)
	out := map[string]int{}
	for resource, n := range now {
		if d := int(n - was[resource]); d > 0 {
			out[resource] = d
		}
	}
	return out
}

// closedWatchesText is "none" or "memberdatabases 3, leases 1", most first.
func closedWatchesText(closed map[string]int) string {
	if len(closed) == 0 {
		return "none"
	}
	resources := make([]string, 0, len(closed))
	for r := range closed {
		resources = append(resources, r)
	}
	sort.Slice(resources, func(i, j int) bool {
		if closed[resources[i]] != closed[resources[j]] {
			return closed[resources[i]] > closed[resources[j]]
		}
		return resources[i] < resources[j]
	})
	parts := make([]string, len(resources))
	for i, r := range resources {
		parts[i] = fmt.Sprintf("%s %d", r, closed[r])
	}
	return strings.Join(parts, ", ")
}

// AgentFigures are what the agents in the harness counted in a phase (their own metrics, from
// the harness's registry, which all of them share): how their hub Lease renewals went, and how
// many primaries they fenced because renewals did not succeed within fenceAfter.
type AgentFigures struct {
	Renewals        int `json:"renewals"`
	RenewalErrors   int `json:"renewalErrors"`
	RenewalsOver5s  int `json:"renewalsOver5s"`
	PrimariesFenced int `json:"primariesFenced"`
}

// agentCounts reads the agents' metrics from the harness's own registry.
func agentCounts() AgentFigures {
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return AgentFigures{}
	}
	f := families{}
	for _, fam := range fams {
		f[fam.GetName()] = fam
	}
	var total, fast float64
	for _, m := range f["dbfleet_agent_hub_lease_renewal_seconds"].GetMetric() {
		h := m.GetHistogram()
		total += float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == 5 {
				fast += float64(b.GetCumulativeCount())
			}
		}
	}
	return AgentFigures{
		Renewals:        int(total),
		RenewalErrors:   int(f.sum("dbfleet_agent_hub_lease_renewals_total", map[string]string{"result": "error"})),
		RenewalsOver5s:  int(total - fast),
		PrimariesFenced: int(f.sum("dbfleet_agent_primaries_fenced_total", nil)),
	}
}

// since is what happened between before and a.
func (a AgentFigures) since(before AgentFigures) *AgentFigures {
	return &AgentFigures{
		Renewals: a.Renewals - before.Renewals, RenewalErrors: a.RenewalErrors - before.RenewalErrors,
		RenewalsOver5s: a.RenewalsOver5s - before.RenewalsOver5s, PrimariesFenced: a.PrimariesFenced - before.PrimariesFenced,
	}
}

func (a *AgentFigures) text() string {
	if a == nil {
		return "not measured"
	}
	return fmt.Sprintf("%d primaries fenced; %d hub Lease renewals, %d failed, %d took over 5 s", a.PrimariesFenced, a.Renewals, a.RenewalErrors, a.RenewalsOver5s)
}
