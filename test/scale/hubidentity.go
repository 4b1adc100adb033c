package scale

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// hubServiceAccount is the hub's identity in deploy/hub.
var hubServiceAccount = metav1.ObjectMeta{Namespace: "dbfleet-system", Name: "dbfleet-hub"}

// hubIdentityFiles are the parts of deploy/hub that make the hub's identity: its namespace,
// ServiceAccount and RBAC (the Deployment and Service are not needed to run `hub run` here).
var hubIdentityFiles = []string{"namespace.yaml", "rbac/service_account.yaml", "rbac/role.yaml",
	"rbac/role_binding.yaml", "rbac/leader_election.yaml"}

// hubKubeconfig installs the hub's identity from deploy/hub and returns a kubeconfig with a token
// of its ServiceAccount. `hub run` then has the rights it has when deployed, and API Priority and
// Fairness classifies its requests as deployed (FlowSchema dbfleet-hub, workload-high) instead of
// exempting them, as it does system:masters.
func (b *bench) hubKubeconfig(ctx context.Context) ([]byte, error) {
	for _, name := range hubIdentityFiles {
		objs, err := framework.ReadObjects(filepath.Join(framework.RepoRoot(), "deploy", "hub", name))
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if err := b.admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	// Long enough for any run; a run outliving it would see the hub lose its access.
	seconds := int64((48 * time.Hour).Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	sa := &corev1.ServiceAccount{ObjectMeta: hubServiceAccount}
	if err := b.admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("request a token for the hub's ServiceAccount: %w", err)
	}
	ep, err := join.HubEndpointFromConfig(b.env.Config)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: ep.Server, CertificateAuthorityData: ep.CAData,
		TLSServerName: ep.TLSServerName, InsecureSkipTLSVerify: ep.Insecure}
	kc.AuthInfos["dbfleet-hub"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "dbfleet-hub", Namespace: hubServiceAccount.Namespace}
	kc.CurrentContext = "hub"
	return clientcmd.Write(*kc)
}
