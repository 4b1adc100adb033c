package scale

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/join"
)

// hubServiceAccount is the hub's identity in deploy/hub.
var hubServiceAccount = metav1.ObjectMeta{Namespace: hub.Namespace, Name: "dbfleet-hub"}

// hubIdentityFiles are the parts of deploy/hub that make the hub's identity: its namespace,
// ServiceAccount and RBAC (the Deployment and Service are not needed to run `hub run` here).
var hubIdentityFiles = []string{"namespace.yaml", "rbac/service_account.yaml", "rbac/role.yaml",
	"rbac/role_binding.yaml", "rbac/leader_election.yaml"}

// hubKubeconfig installs the hub's identity from deploy/hub and returns a kubeconfig with a token
// of its ServiceAccount. `hub run` then has the rights it has when deployed, and API Priority and
// Fairness classifies its requests as deployed (FlowSchema dbfleet-hub, workload-high) instead of
// exempting them, as it does system:masters.
func (b *bench) hubKubeconfig(ctx context.Context) ([]byte, error) {
	if err := applyDeployHub(ctx, b.admin, hubIdentityFiles...); err != nil {
		return nil, err
	}
	// Long enough for any run; a run outliving it would see the hub lose its access.
	token, _, err := join.MintToken(ctx, b.admin, &corev1.ServiceAccount{ObjectMeta: hubServiceAccount}, 48*time.Hour)
	if err != nil {
		return nil, err
	}
	ep, err := join.HubEndpointFromConfig(b.env.Config)
	if err != nil {
		return nil, err
	}
	return join.TokenKubeconfig(ep, hubServiceAccount.Name, hubServiceAccount.Namespace, token)
}
