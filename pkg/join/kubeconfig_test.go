package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestHubKubeconfig(t *testing.T) {
	data, err := HubKubeconfig(HubEndpoint{Server: "https://hub:6443", CAData: []byte("CA")}, "east", "TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || ctx.Namespace != "member-east" {
		t.Fatalf("context %+v, want namespace member-east", ctx)
	}
	if cl := cfg.Clusters[ctx.Cluster]; cl.Server != "https://hub:6443" || string(cl.CertificateAuthorityData) != "CA" || cl.InsecureSkipTLSVerify {
		t.Errorf("cluster %+v", cl)
	}
	if u := cfg.AuthInfos[ctx.AuthInfo]; u.Token != "TOKEN" {
		t.Errorf("user %+v", u)
	}
}

func TestHubEndpointFromConfig(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	ep, err := HubEndpointFromConfig(&rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if string(ep.CAData) != "PEM" || !ep.loopback() {
		t.Errorf("endpoint %+v loopback %v", ep, ep.loopback())
	}
	if (HubEndpoint{Server: "https://hub.example.com"}).loopback() || !(HubEndpoint{Server: "https://localhost:6443"}).loopback() {
		t.Error("loopback detection")
	}
	if _, err := HubEndpointFromConfig(&rest.Config{}); err == nil {
		t.Error("a config without a server is accepted")
	}
}

func TestLoadMemberKubeconfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("CA-PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "member.kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "https://lab.example.com:6443", certificate-authority: ca.crt}
- name: other
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: lab-admin
  user: {token: secret}
- name: other-user
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: get-token, interactiveMode: Never}
contexts:
- name: lab
  context: {cluster: lab, user: lab-admin}
- name: other
  context: {cluster: other, user: other-user}
current-context: lab
`), 0o600); err != nil {
		t.Fatal(err)
	}
	data, warnings, err := LoadMemberKubeconfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 || len(cfg.Contexts) != 1 {
		t.Errorf("not minified: %d clusters, %d users, %d contexts", len(cfg.Clusters), len(cfg.AuthInfos), len(cfg.Contexts))
	}
	if cl := cfg.Clusters["lab"]; cl == nil || string(cl.CertificateAuthorityData) != "CA-PEM" || cl.CertificateAuthority != "" {
		t.Errorf("CA file not inlined: %+v", cl)
	}

	_, warnings, err = LoadMemberKubeconfig(path, "other")
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "credential plugin") || !strings.Contains(w, "loopback") {
		t.Errorf("warnings %q, want the plugin and the loopback server named", warnings)
	}
	if _, _, err := LoadMemberKubeconfig(path, "missing"); err == nil {
		t.Error("a missing context is accepted")
	}
	if _, _, err := LoadMemberKubeconfig(filepath.Join(dir, "nope"), ""); err == nil {
		t.Error("a missing file is accepted")
	}
}
