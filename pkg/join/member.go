package join

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/images"
)

// The agent's manifests for the member cluster.

const (
	agentUID        = images.NonRootUID
	metricsPort     = 8080
	probePort       = 8081
	labelName       = "app.kubernetes.io/name"
	labelPartOf     = "app.kubernetes.io/part-of"
	podSecurityMode = "pod-security.kubernetes.io/enforce"
)

// AgentSettings are what the agent's Deployment runs with.
type AgentSettings struct {
	Cluster                       string
	Image                         string
	HeartbeatInterval, FenceAfter string // durations as the agent's flags take them
}

func memberLabels(cluster string) map[string]string {
	return map[string]string{
		labelName:                    AgentName,
		labelPartOf:                  "dbfleet",
		dbfleetv1alpha1.LabelCluster: cluster,
	}
}

// AgentMemberRules are everything the agent may do in its member cluster. Each rule is for a
// thing the agent does: run a share (StatefulSet, headless Service, PDBs), label its pods with
// their role, read Nodes for the cluster's capacity, create the database's namespace, expand the
// PVCs of a share whose storage grew (reading their StorageClass, which must allow it) and remove
// those of a deleted share when its retention policy says Delete, keep the member-local primary
// Lease dbfleet-primary-<db>, and record Events.
func AgentMemberRules() []rbacv1.PolicyRule {
	manage := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: manage},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: manage},
		// ClusterSetIP network mode: the MCS API's ServiceExports of <db>-rw and <db>-ro.
		{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceexports"}, Verbs: manage},
		{APIGroups: []string{""}, Resources: []string{"secrets", "serviceaccounts"}, Verbs: manage},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: manage},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: manage},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{groupCoordination}, Resources: []string{"leases"}, Verbs: manage},
		{APIGroups: []string{"", groupEvents}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// MemberManifests are the objects that install the agent of a cluster in that cluster, in the
// order they should be applied.
func MemberManifests(s AgentSettings, hubKubeconfig []byte) []client.Object {
	labels := func() map[string]string { return memberLabels(s.Cluster) }
	nsLabels := labels()
	// The agent runs under the restricted Pod Security Standard; enforcing it on its namespace
	// keeps it that way.
	nsLabels[podSecurityMode] = "restricted"
	policy := AgentAdmissionPolicy(labels())
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace, Labels: nsLabels}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: HubKubeconfigSecret, Labels: labels()},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{KubeconfigKey: hubKubeconfig},
		},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: AgentName, Labels: labels()}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: AgentName, Labels: labels()},
			Rules:      AgentMemberRules(),
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: AgentName, Labels: labels()},
			RoleRef:    rbacv1.RoleRef{APIGroup: groupRBAC, Kind: "ClusterRole", Name: AgentName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: SystemNamespace, Name: AgentName}},
		},
		agentDeployment(s, labels),
		// What the agent's RBAC allows, kept to dbfleet's objects in database namespaces.
		policy[0], policy[1],
	}
}

func agentDeployment(s AgentSettings, labels func() map[string]string) *appsv1.Deployment {
	selector := map[string]string{labelName: AgentName}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("probes"),
		}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: AgentName, Labels: labels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			// Recreate: never two agents of one cluster at once, not even during a rollout; two
			// would renew the same hub Lease and act on the same shares.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					ServiceAccountName: AgentName,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](agentUID),
						RunAsGroup:     ptr.To[int64](agentUID),
						FSGroup:        ptr.To[int64](agentUID), // makes the 0440 Secret files readable
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "agent",
						Image: s.Image,
						Args: []string{
							"--hub-kubeconfig=" + HubKubeconfigMountPath + "/" + KubeconfigKey,
							"--hub-kubeconfig-secret=" + SystemNamespace + "/" + HubKubeconfigSecret,
							"--cluster-name=" + s.Cluster,
							"--heartbeat-interval=" + s.HeartbeatInterval,
							"--fence-after=" + s.FenceAfter,
						},
						Ports: []corev1.ContainerPort{
							{Name: "metrics", ContainerPort: metricsPort},
							{Name: "probes", ContainerPort: probePort},
						},
						LivenessProbe:  probe("/healthz"),
						ReadinessProbe: probe("/readyz"),
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "hub-kubeconfig", MountPath: HubKubeconfigMountPath, ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							RunAsNonRoot:             ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{
						Name: "hub-kubeconfig",
						VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: HubKubeconfigSecret, DefaultMode: ptr.To[int32](0o440),
						}},
					}},
				},
			},
		},
	}
}

// RenderYAML writes objects as one multi-document YAML stream, each document as a user would
// write it (apiVersion and kind, no status), after a comment header.
func RenderYAML(header string, objs []client.Object) ([]byte, error) {
	var out []byte
	out = append(out, header...)
	for _, obj := range objs {
		u, err := toUnstructured(obj)
		if err != nil {
			return nil, err
		}
		doc, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("render %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		out = append(out, "---\n"...)
		out = append(out, doc...)
	}
	return out, nil
}
