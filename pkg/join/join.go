package join

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
)

// Result is what Join did and what the member needs.
type Result struct {
	// Cluster is the MemberCluster as the hub stored it.
	Cluster *dbfleetv1alpha1.MemberCluster
	// Created is true when the MemberCluster did not exist before.
	Created bool

	// Pull mode only:

	// ServiceAccount is the agent's new identity on the hub.
	ServiceAccount *corev1.ServiceAccount
	// RevokedServiceAccountUID is the UID of the ServiceAccount join deleted to revoke the tokens
	// of an earlier join; empty on a first join.
	RevokedServiceAccountUID types.UID
	// TokenExpiry is when the minted token stops working, as the API server granted it.
	TokenExpiry time.Time
	// HubKubeconfig reaches the hub with the minted token.
	HubKubeconfig []byte
	// Manifests install the agent in the member (multi-document YAML).
	Manifests []byte
	// HelmValues install the same with the dbfleet-agent chart (a values file).
	HelmValues []byte

	// Push mode only: the hub Secret holding the member's kubeconfig.
	KubeconfigSecret *dbfleetv1alpha1.SecretReference

	// Warnings are things the user should know: for example a hub server agents cannot reach.
	Warnings []string
}

// Join joins (or re-joins) a cluster: see the package documentation. c must act as a hub admin;
// hub is how agents reach the hub, with o.HubServer and o.HubCA overriding its server and CA.
// Every step is idempotent, so a failed join can simply be run again.
func Join(ctx context.Context, c client.Client, hub HubEndpoint, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &Result{}
	existing := &dbfleetv1alpha1.MemberCluster{}
	switch err := c.Get(ctx, client.ObjectKey{Name: o.Name}, existing); {
	case apierrors.IsNotFound(err):
		res.Created = true
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("the hub does not serve MemberClusters: install the dbfleet CRDs first (kubectl apply -f deploy/crds/): %w", err)
	case err != nil:
		return nil, fmt.Errorf("get MemberCluster %s: %w", o.Name, err)
	default:
		if !existing.DeletionTimestamp.IsZero() {
			return nil, fmt.Errorf("MemberCluster %s is being deleted; wait until it is gone, then join again", o.Name)
		}
		if mode := existing.Spec.SyncMode; mode != "" && mode != o.SyncMode {
			return nil, fmt.Errorf("MemberCluster %s is joined in %s mode; the sync mode cannot change: run `hub unjoin %s` first, then join in %s mode",
				o.Name, mode, o.Name, o.SyncMode)
		}
	}

	// The member namespace first: MemberDatabases and the Lease live there, and in Pull mode the
	// agent's credential does.
	ns := memberNamespace(o.Name)
	if err := ensureNamespace(ctx, c, ns); err != nil {
		return nil, err
	}

	var secretRef *dbfleetv1alpha1.SecretReference
	if o.SyncMode == dbfleetv1alpha1.SyncPush {
		warning, err := checkMemberKubeconfig(ctx, &o)
		if err != nil {
			return nil, err
		}
		if warning != "" {
			res.Warnings = append(res.Warnings, warning)
		}
		// The Secret before the MemberCluster, so that the reference never dangles.
		if err := ensureSystemNamespace(ctx, c); err != nil {
			return nil, err
		}
		secret := pushSecret(o.Name, o.MemberKubeconfig)
		if err := apply(ctx, c, secret); err != nil {
			return nil, err
		}
		secretRef = &dbfleetv1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}
		res.KubeconfigSecret = secretRef
	}

	mc := memberCluster(&o, secretRef)
	if err := apply(ctx, c, mc); err != nil {
		return nil, err
	}
	res.Cluster = mc

	if o.SyncMode == dbfleetv1alpha1.SyncPush {
		return res, nil
	}
	if err := joinAgent(ctx, c, hub, &o, res); err != nil {
		return nil, err
	}
	return res, nil
}

// checkMemberKubeconfig refuses a Push member's kubeconfig that carries more than the hub needs
// in the member, or whose rights cannot be asked, unless o.AllowBroadKubeconfig, which turns the
// refusal into the warning it returns: the hub keeps the kubeconfig in a Secret, and whoever
// reads that Secret can do in the member what its user can.
func checkMemberKubeconfig(ctx context.Context, o *Options) (string, error) {
	const allow = "; give a user with only the rights docs/join.md lists for the member, or pass --allow-broad-kubeconfig to join anyway"
	broad, err := BroadMemberRights(ctx, o.MemberKubeconfig)
	switch {
	case err != nil && !o.AllowBroadKubeconfig:
		return "", fmt.Errorf("cannot check what --member-kubeconfig may do in %s: %w%s", o.Name, err, allow)
	case err != nil:
		return fmt.Sprintf("joined %s without knowing what its kubeconfig may do (%v): the hub keeps it, and whoever reads it can do as much", o.Name, err), nil
	case len(broad) > 0 && !o.AllowBroadKubeconfig:
		return "", fmt.Errorf("--member-kubeconfig may %s in %s, more than the hub needs there%s", strings.Join(broad, ", "), o.Name, allow)
	case len(broad) > 0:
		return fmt.Sprintf("%s's kubeconfig may %s, more than the hub needs; the hub keeps it in Secret %s/%s, and whoever reads that Secret can do as much in %s",
			o.Name, strings.Join(broad, ", "), hub.Namespace, push.SecretName(o.Name), o.Name), nil
	}
	return "", nil
}

// joinAgent creates the agent's hub credential, mints its token and renders its manifests.
func joinAgent(ctx context.Context, c client.Client, hub HubEndpoint, o *Options, res *Result) error {
	// RBAC before the ServiceAccount: the moment a token exists, it can do what it needs.
	for _, obj := range []client.Object{agentRole(o.Name), agentRoleBinding(o.Name)} {
		if err := apply(ctx, c, obj); err != nil {
			return err
		}
	}
	if err := deleteLegacyClusterRole(ctx, c, o.Name); err != nil {
		return err
	}
	sa := agentServiceAccount(o.Name)
	oldUID, err := replaceServiceAccount(ctx, c, sa)
	if err != nil {
		return err
	}
	res.ServiceAccount, res.RevokedServiceAccountUID = sa, oldUID
	token, expiry, err := MintToken(ctx, c, sa, o.TokenExpiration)
	if err != nil {
		return err
	}
	res.TokenExpiry = expiry

	if o.HubServer != "" {
		hub.Server = o.HubServer
	}
	if len(o.HubCA) > 0 {
		hub.CAData = o.HubCA
	}
	if hub.loopback() {
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"the hub server %s is a loopback address: an agent in another cluster cannot reach it; pass --hub-server with an address it can reach", hub.Server))
	}
	if hub.Insecure {
		res.Warnings = append(res.Warnings, "the admin kubeconfig skips TLS verification of the hub, so the agent's kubeconfig does too")
	}
	if res.HubKubeconfig, err = HubKubeconfig(hub, o.Name, token); err != nil {
		return fmt.Errorf("write the agent's hub kubeconfig: %w", err)
	}
	settings := AgentSettings{
		Cluster:           o.Name,
		Image:             o.AgentImage,
		HeartbeatInterval: o.HeartbeatInterval.String(),
		FenceAfter:        o.FenceAfter.String(),
	}
	now, until := time.Now().UTC().Format(time.RFC3339), expiry.UTC().Format(time.RFC3339)
	header := fmt.Sprintf(`# dbfleet agent for member cluster %q, generated by "hub join" on %s.
# Apply it to the member cluster (kubectl --context <member> apply -f ...).
# It holds a credential for the hub (valid until %s): keep it as secret as a kubeconfig.
`, o.Name, now, until)
	if res.Manifests, err = RenderYAML(header, MemberManifests(settings, res.HubKubeconfig)); err != nil {
		return err
	}
	valuesHeader := fmt.Sprintf(`# Values of the dbfleet-agent chart for member cluster %q, generated by "hub join" on %s.
# Install it into the member cluster:
#   helm --kube-context <member> install dbfleet-agent deploy/charts/dbfleet-agent -f <this file>
# It holds a credential for the hub (valid until %s): keep it as secret as a kubeconfig.
`, o.Name, now, until)
	res.HelmValues, err = RenderHelmValues(valuesHeader, HelmValues(settings, hub, token))
	return err
}

// ensureNamespace creates ns or brings its labels up to date, refusing one that is being deleted
// (an earlier unjoin): what join would write there would vanish with it.
func ensureNamespace(ctx context.Context, c client.Client, ns *corev1.Namespace) error {
	existing := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKeyFromObject(ns), existing)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get namespace %s: %w", ns.Name, err)
	}
	if err == nil && (!existing.DeletionTimestamp.IsZero() || existing.Status.Phase == corev1.NamespaceTerminating) {
		return fmt.Errorf("namespace %s is being deleted (by an earlier unjoin?): wait until it is gone (kubectl wait --for=delete namespace/%s), then join again",
			ns.Name, ns.Name)
	}
	return apply(ctx, c, ns)
}

// ensureSystemNamespace creates the hub's namespace (hub.Namespace) when it is missing (the hub's
// install and `hub run` normally create it). It is shared by every cluster, so it gets no cluster
// label and unjoin keeps it.
func ensureSystemNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hub.Namespace, Labels: map[string]string{LabelManagedBy: ManagedByJoin}}}
	err := c.Create(ctx, ns)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", hub.Namespace, err)
	}
	return nil
}

// Summary describes what Join did, for people.
func (r *Result) Summary() string {
	var b strings.Builder
	mc := r.Cluster
	verb := "updated"
	if r.Created {
		verb = "created"
	}
	fmt.Fprintf(&b, "MemberCluster %s %s (%s mode, region %s, zone %s", mc.Name, verb, mc.Spec.SyncMode, mc.Spec.Region, mc.Spec.Zone)
	if mc.Spec.Provider != "" {
		fmt.Fprintf(&b, ", provider %s", mc.Spec.Provider)
	}
	fmt.Fprintf(&b, "); its MemberDatabases live in hub namespace %s\n", dbfleetv1alpha1.MemberNamespace(mc.Name))
	if r.KubeconfigSecret != nil {
		fmt.Fprintf(&b, "the member's kubeconfig is stored in hub Secret %s/%s (key %s); the hub reconciles the member through it, no agent is needed\n",
			r.KubeconfigSecret.Namespace, r.KubeconfigSecret.Name, push.SecretKey)
	}
	if r.ServiceAccount != nil {
		fmt.Fprintf(&b, "agent credential: ServiceAccount %s/%s with Role %s in its namespace, nothing cluster-wide; token valid until %s\n",
			r.ServiceAccount.Namespace, r.ServiceAccount.Name, AgentName, r.TokenExpiry.UTC().Format(time.RFC3339))
		if r.RevokedServiceAccountUID != "" {
			fmt.Fprintf(&b, "rotated: the previous ServiceAccount (uid %s) was deleted and recreated, so every token from an earlier join stops working\n"+
				"  (within the API server's 10 s authentication cache); apply the new manifests to the member, or its running agent loses the hub\n", r.RevokedServiceAccountUID)
		}
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// deleteLegacyClusterRole removes the ClusterRole and ClusterRoleBinding with which joins before
// the MemberClusterReport let the agent write its MemberCluster's status: a re-join upgrades the
// cluster to the namespaced grant, and the hub API server stops scanning the binding.
func deleteLegacyClusterRole(ctx context.Context, c client.Client, cluster string) error {
	crb, cr := legacyAgentGrant(cluster)
	if err := c.Delete(ctx, crb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete the legacy ClusterRoleBinding %s: %w", crb.Name, err)
	}
	if err := c.Delete(ctx, cr); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete the legacy ClusterRole %s: %w", cr.Name, err)
	}
	return nil
}
