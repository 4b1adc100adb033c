package join

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// broadRights are rights the hub never needs in a Push member (it needs AgentMemberRules), and
// which would hand whoever reads the hub's copy of the kubeconfig the member: join asks the
// member, as the kubeconfig's user, whether it holds any of them.
var broadRights = []struct {
	what  string
	attrs authorizationv1.ResourceAttributes
}{
	{"every verb on every resource (cluster-admin)", authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}},
	{"create ClusterRoleBindings", authorizationv1.ResourceAttributes{Verb: "create", Group: groupRBAC, Resource: "clusterrolebindings"}},
	{"bind ClusterRoles", authorizationv1.ResourceAttributes{Verb: "bind", Group: groupRBAC, Resource: "clusterroles"}},
	{"escalate ClusterRoles", authorizationv1.ResourceAttributes{Verb: "escalate", Group: groupRBAC, Resource: "clusterroles"}},
	{"impersonate users", authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users"}},
	{"exec into pods", authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "exec"}},
	{"create pods", authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods"}},
	{"delete namespaces", authorizationv1.ResourceAttributes{Verb: "delete", Resource: "namespaces"}},
	{"delete nodes", authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"}},
}

// memberCheckTimeout bounds join's questions to a Push member's API server.
const memberCheckTimeout = 15 * time.Second

// BroadMemberRights asks the member cluster the kubeconfig reaches which of broadRights its user
// holds (SelfSubjectAccessReview, which every authenticated user may ask) and returns them, in
// words; none means the kubeconfig carries no more than a Push member needs, as far as join can
// tell.
func BroadMemberRights(ctx context.Context, kubeconfig []byte) ([]string, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("member kubeconfig: %w", err)
	}
	cfg.Timeout = memberCheckTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("member kubeconfig: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, memberCheckTimeout)
	defer cancel()
	var broad []string
	for _, r := range broadRights {
		attrs := r.attrs
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask the member what the kubeconfig may do (%s): %w", r.what, err)
		}
		if got.Status.Allowed {
			broad = append(broad, r.what)
		}
	}
	return broad, nil
}
