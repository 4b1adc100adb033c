package join

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// AgentChartValues are the values of the dbfleet-agent chart (deploy/charts/dbfleet-agent) that
// make it install what MemberManifests would: `hub join --output-format helm-values` prints
// them. The chart's other values keep their defaults.
type AgentChartValues struct {
	ClusterName       string          `json:"clusterName"`
	Image             AgentChartImage `json:"image"`
	Hub               AgentChartHub   `json:"hub"`
	HeartbeatInterval string          `json:"heartbeatInterval"`
	FenceAfter        string          `json:"fenceAfter"`
}

// AgentChartImage is the chart's image: repository and either tag or digest.
type AgentChartImage struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest,omitempty"`
}

// AgentChartHub is how the agent reaches the hub: the chart writes the agent's hub kubeconfig
// (as HubKubeconfig does) from it.
type AgentChartHub struct {
	Server                string `json:"server"`
	CAData                string `json:"caData,omitempty"`
	TLSServerName         string `json:"tlsServerName,omitempty"`
	InsecureSkipTLSVerify bool   `json:"insecureSkipTLSVerify,omitempty"`
	Token                 string `json:"token"`
}

// SplitImage splits an image reference into the chart's repository and tag or digest:
// "r.example.com:5000/dbfleet/agent:v1" is r.example.com:5000/dbfleet/agent and v1,
// "…/agent@sha256:…" a digest, and a reference without either gets the tag "latest", as a
// container runtime reads it.
func SplitImage(ref string) AgentChartImage {
	if repo, digest, ok := strings.Cut(ref, "@"); ok {
		return AgentChartImage{Repository: repo, Digest: digest}
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return AgentChartImage{Repository: ref[:i], Tag: ref[i+1:]}
	}
	return AgentChartImage{Repository: ref, Tag: "latest"}
}

// HelmValues are the agent chart's values for the agent of s.Cluster that reaches the hub at ep
// with token.
func HelmValues(s AgentSettings, ep HubEndpoint, token string) AgentChartValues {
	return AgentChartValues{
		ClusterName: s.Cluster,
		Image:       SplitImage(s.Image),
		Hub: AgentChartHub{
			Server:                ep.Server,
			CAData:                string(ep.CAData),
			TLSServerName:         ep.TLSServerName,
			InsecureSkipTLSVerify: ep.Insecure,
			Token:                 token,
		},
		HeartbeatInterval: s.HeartbeatInterval,
		FenceAfter:        s.FenceAfter,
	}
}

// RenderHelmValues writes v as a values file, after a comment header.
func RenderHelmValues(header string, v AgentChartValues) ([]byte, error) {
	doc, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("render the agent chart's values: %w", err)
	}
	return append([]byte(header), doc...), nil
}
