package join

import "testing"

func TestSplitImage(t *testing.T) {
	for ref, want := range map[string]AgentChartImage{
		"ghcr.io/dbfleet/agent:latest":                 {Repository: "ghcr.io/dbfleet/agent", Tag: "latest"},
		"registry.example.com:5000/dbfleet/agent:v1.2": {Repository: "registry.example.com:5000/dbfleet/agent", Tag: "v1.2"},
		"registry.example.com:5000/dbfleet/agent":      {Repository: "registry.example.com:5000/dbfleet/agent", Tag: "latest"},
		"dbfleet-agent":                   {Repository: "dbfleet-agent", Tag: "latest"},
		"r.example.com/agent@sha256:abcd": {Repository: "r.example.com/agent", Digest: "sha256:abcd"},
	} {
		if got := SplitImage(ref); got != want {
			t.Errorf("SplitImage(%q) = %+v, want %+v", ref, got, want)
		}
	}
}
