package join

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// HubEndpoint is how an agent reaches and verifies the hub API server.
type HubEndpoint struct {
	// Server is the https URL of the hub API server.
	Server string
	// CAData is the PEM bundle that verifies the hub's serving certificate; empty means the
	// system roots.
	CAData []byte
	// TLSServerName overrides the name the serving certificate is checked against.
	TLSServerName string
	// Insecure skips verification of the hub's certificate (copied from an admin kubeconfig that
	// does so; join warns).
	Insecure bool
}

// HubEndpointFromConfig takes the server and CA of the admin's client configuration. The CA file
// is read, so the endpoint can be handed to another machine.
func HubEndpointFromConfig(cfg *rest.Config) (HubEndpoint, error) {
	ep := HubEndpoint{
		Server:        cfg.Host,
		CAData:        cfg.CAData,
		TLSServerName: cfg.ServerName,
		Insecure:      cfg.Insecure,
	}
	if len(ep.CAData) == 0 && cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return ep, fmt.Errorf("read the hub CA of the admin kubeconfig: %w", err)
		}
		ep.CAData = data
	}
	if ep.Server == "" {
		return ep, errors.New("the admin kubeconfig names no server")
	}
	return ep, nil
}

// loopback says whether the endpoint's host is a loopback address, which an agent in another
// cluster cannot reach.
func (ep HubEndpoint) loopback() bool {
	u, err := url.Parse(ep.Server)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HubKubeconfig is the kubeconfig the agent of cluster uses: the hub endpoint, the token of its
// ServiceAccount, and member-<cluster> as the default namespace.
func HubKubeconfig(ep HubEndpoint, cluster, token string) ([]byte, error) {
	return TokenKubeconfig(ep, AgentName+"-"+cluster, dbfleetv1alpha1.MemberNamespace(cluster), token)
}

// TokenKubeconfig is a kubeconfig that reaches the hub endpoint as user, authenticated by token,
// with namespace as the default.
func TokenKubeconfig(ep HubEndpoint, user, namespace, token string) ([]byte, error) {
	name := "dbfleet-hub"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   ep.Server,
		CertificateAuthorityData: ep.CAData,
		TLSServerName:            ep.TLSServerName,
		InsecureSkipTLSVerify:    ep.Insecure,
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}

// LoadMemberKubeconfig reads the kubeconfig that reaches a Push-mode member and makes it
// self-contained for storing in a hub Secret: only its current context (or context, when given)
// is kept, and certificate and key files are inlined. The warnings name what may not work from
// inside the hub (credential plugins, loopback servers).
func LoadMemberKubeconfig(path, context string) (data []byte, warnings []string, err error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load --member-kubeconfig: %w", err)
	}
	if context != "" {
		cfg.CurrentContext = context
	}
	if cfg.CurrentContext == "" {
		return nil, nil, fmt.Errorf("--member-kubeconfig %s has no current context", path)
	}
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return nil, nil, fmt.Errorf("--member-kubeconfig %s: %w", path, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, nil, fmt.Errorf("--member-kubeconfig %s: inline certificate files: %w", path, err)
	}
	if err := clientcmd.Validate(*cfg); err != nil {
		return nil, nil, fmt.Errorf("--member-kubeconfig %s: %w", path, err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if auth := cfg.AuthInfos[ctx.AuthInfo]; auth != nil && (auth.Exec != nil || auth.AuthProvider != nil) {
		warnings = append(warnings, fmt.Sprintf("--member-kubeconfig user %q runs a credential plugin, which the hub's pod may not have; prefer a ServiceAccount token", ctx.AuthInfo))
	}
	if cl := cfg.Clusters[ctx.Cluster]; cl != nil && (HubEndpoint{Server: cl.Server}).loopback() {
		warnings = append(warnings, fmt.Sprintf("--member-kubeconfig server %s is a loopback address, reachable only from this machine", cl.Server))
	}
	data, err = clientcmd.Write(*cfg)
	if err != nil {
		return nil, nil, err
	}
	return data, warnings, nil
}
