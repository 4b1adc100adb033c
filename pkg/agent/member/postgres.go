package member

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// ReadWriteServiceName and ReadOnlyServiceName name a postgres database's client Services in a
// member cluster: "<db>-rw" (the primary) and "<db>-ro" (the standbys).
func ReadWriteServiceName(db string) string { return db + "-rw" }
func ReadOnlyServiceName(db string) string  { return db + "-ro" }

// InstanceServiceAccountName names the ServiceAccount, Role and RoleBinding of a postgres
// database's instance managers: "<db>-instance".
func InstanceServiceAccountName(db string) string { return db + "-instance" }

// DesiredRoleServices are a postgres share's client Services. Without the instance manager
// (instanceManaged false) they select on the placement's role label alone, as the pods run
// nothing that could say otherwise; with it, also on the role the instance reports it really
// runs, so that <db>-rw never sends a write to a pod that is not a writable primary.
func DesiredRoleServices(mdb *dbfleetv1alpha1.MemberDatabase, instanceManaged bool) []*corev1.Service {
	port := engines[mdb.Spec.Database.Engine].port
	svc := func(name, role, instanceRole string) *corev1.Service {
		sel := selectorLabels(mdb)
		sel[contract.LabelRole] = role
		if instanceManaged {
			sel[contract.LabelInstanceRole] = instanceRole
		}
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: name, Labels: objectLabels(mdb)},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: sel,
				Ports:    []corev1.ServicePort{{Name: "db", Port: port, TargetPort: intstr.FromString("db")}},
			},
		}
	}
	db := mdb.Spec.DatabaseRef.Name
	return []*corev1.Service{
		svc(ReadWriteServiceName(db), contract.PodRolePrimary, contract.InstanceRolePrimary),
		svc(ReadOnlyServiceName(db), contract.PodRoleReplica, contract.InstanceRoleStandby),
	}
}

// DesiredInstanceRBAC is what a postgres database's instance managers may do in their member
// cluster: get and watch the share's pods by name (each reads its own Pod, for its role label
// and annotations; the StatefulSet names them <db>-<ordinal>, so the names are known before the
// pods exist) and the database's primary Lease. The watch is by name too (a metadata.name field
// selector, which RBAC authorises against resourceNames): no list, nothing else, nothing to write.
func DesiredInstanceRBAC(mdb *dbfleetv1alpha1.MemberDatabase) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	ns, db := mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name
	name := InstanceServiceAccountName(db)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: objectLabels(mdb)}
	}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta()}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				ResourceNames: []string{contract.PrimaryLeaseName(db)}, Verbs: []string{"get", "watch"}},
		},
	}
	// Empty resourceNames would mean every pod: a drained share gets no pod rule at all.
	if pods := sharePodNames(mdb); len(pods) > 0 {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: pods, Verbs: []string{"get", "watch"}})
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	return sa, role, binding
}

// DesiredCredentials are the member-side Secrets "<db>-<kind>" made from the copies the hub
// carried into member-<cluster> (carried, as the agent read them there), by kind.
func DesiredCredentials(mdb *dbfleetv1alpha1.MemberDatabase, carried []corev1.Secret) []*corev1.Secret {
	var out []*corev1.Secret
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		want := dbfleetv1alpha1.CarriedCredentialsSecretName(mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name, kind)
		for i := range carried {
			c := &carried[i]
			if c.Name != want {
				continue
			}
			labels := objectLabels(mdb)
			labels[dbfleetv1alpha1.LabelCredentials] = kind
			out = append(out, &corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Namespace: mdb.Spec.DatabaseRef.Namespace,
					Name:      dbfleetv1alpha1.CredentialsSecretName(mdb.Spec.DatabaseRef.Name, kind),
					Labels:    labels,
				},
				Type: corev1.SecretTypeOpaque,
				Data: maps.Clone(c.Data),
			})
		}
	}
	return out
}

// Where the instance manager's pieces go in a postgres pod.
const (
	instanceBinVolume = "dbfleet-bin"
	instanceBinDir    = "/dbfleet"
	secretsDir        = "/etc/dbfleet/secrets"
	// InitContainerName copies dbfleet-instance into the shared emptyDir.
	InitContainerName = "bootstrap-instance"
)

// withInstanceManager turns a postgres StatefulSet into one whose database container runs
// dbfleet-instance as PID 1: an init container of image (the agent's) copies the binary into an
// emptyDir, the container runs it with its settings in the environment, the credentials Secrets
// are mounted, it serves /status on the "status" port, and readiness is the instance's /readyz
// (a primary that takes writes, a standby that streams). The pods run as the instance's
// ServiceAccount unless the user named another.
func withInstanceManager(sts *appsv1.StatefulSet, mdb *dbfleetv1alpha1.MemberDatabase, image, cluster string) {
	db := mdb.Spec.DatabaseRef.Name
	spec := &sts.Spec.Template.Spec
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = InstanceServiceAccountName(db)
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: instanceBinVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.InitContainers = append(spec.InitContainers, corev1.Container{
		Name:         InitContainerName,
		Image:        image,
		Command:      []string{"/dbfleet-instance", "--copy-to=" + instanceBinDir},
		VolumeMounts: []corev1.VolumeMount{{Name: instanceBinVolume, MountPath: instanceBinDir}},
	})
	c := &spec.Containers[0]
	c.Name = "postgres"
	c.Command = []string{instanceBinDir + "/dbfleet-instance"}
	c.Args = nil
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: instanceBinVolume, MountPath: instanceBinDir, ReadOnly: true})
	secretDirEnv := map[string]string{
		dbfleetv1alpha1.CredentialsSuperuser:   contract.EnvSuperuserSecretDir,
		dbfleetv1alpha1.CredentialsReplication: contract.EnvReplicationSecretDir,
		dbfleetv1alpha1.CredentialsApp:         contract.EnvAppSecretDir,
	}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	env := []corev1.EnvVar{
		{Name: contract.EnvPodName, ValueFrom: field("metadata.name")},
		{Name: contract.EnvNamespace, ValueFrom: field("metadata.namespace")},
		{Name: contract.EnvCluster, Value: cluster},
		{Name: contract.EnvDatabase, Value: db},
		{Name: contract.EnvDataVolume, Value: engines[dbfleetv1alpha1.EnginePostgres].dataDir},
		{Name: contract.EnvHTTPPort, Value: strconv.Itoa(contract.Port)},
		{Name: contract.EnvPostgresPort, Value: strconv.Itoa(int(engines[dbfleetv1alpha1.EnginePostgres].port))},
	}
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		name := "credentials-" + kind
		dir := secretsDir + "/" + kind
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: dbfleetv1alpha1.CredentialsSecretName(db, kind), DefaultMode: ptr.To[int32](0o440)}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: secretDirEnv[kind], Value: dir})
	}
	// The user's environment comes last, so it may override (a bin dir, say), never replace ours.
	c.Env = append(env, c.Env...)
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: StatusPortName, ContainerPort: contract.Port})
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: contract.ReadyPath, Port: intstr.FromString(StatusPortName)}},
		PeriodSeconds: 2, FailureThreshold: 3, TimeoutSeconds: 3,
	}
	// A restart is the worst answer to a busy node: it kills an initdb, a pg_basebackup or a
	// crash recovery half-way, and the next attempt is as slow. With the default 1 s timeout, ten
	// databases bootstrapping at once on two cores had every instance restarted over and over
	// and none ever Ready. /healthz answers as soon as the manager runs, so it only has to answer
	// within 5 s, once in a minute.
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: contract.HealthPath, Port: intstr.FromString(StatusPortName)}},
		PeriodSeconds: 10, FailureThreshold: 6, TimeoutSeconds: 5,
	}
}

// desiredInstanceAnnotations are the annotations each pod's instance manager reads (package
// pkg/instance/observe), by pod name: every pod gets the share's epoch, its promotion token
// (spec.promoteAfterLSN, a planned switchover's: only the primary pod acts on it) and its synchronous
// replication (spec.database.postgres.synchronous, counting the other clusters' pods of
// spec.standbys, which only the primary share has); in the primary
// cluster's share, the standbys get the primary pod's address as their primary endpoint once it
// has one, and the primary pod the names of the share's standbys and of the other clusters'
// (spec.standbys, from the hub), for which it keeps replication slots. In the other clusters'
// shares, the standbys follow spec.primaryEndpoint, which the hub writes from the primary
// share's status.endpoints.readWrite.
func desiredInstanceAnnotations(mdb *dbfleetv1alpha1.MemberDatabase, pods []corev1.Pod) map[string]map[string]string {
	out := map[string]map[string]string{}
	var primary *corev1.Pod
	var standbys []string
	own := sharePodNames(mdb)
	var remote []string
	for _, name := range mdb.Spec.Standbys {
		if !slices.Contains(own, name) {
			remote = append(remote, name)
		}
	}
	sort.Strings(remote)
	durability, number := "", 0
	if pg := mdb.Spec.Database.Postgres; pg != nil && pg.Synchronous != nil {
		durability, number = string(pg.Synchronous.DataDurability), int(pg.Synchronous.Number)
		if durability == "" {
			durability = string(dbfleetv1alpha1.DataDurabilityRequired)
		}
	}
	for i := range pods {
		pod := &pods[i]
		role, err := PodRole(mdb, pod.Name, false)
		if err != nil {
			continue
		}
		// Every pod, not only the primary: the epoch, durability and standbys arrive in one
		// patch, so no pod is ever primary at an epoch without them.
		out[pod.Name] = map[string]string{contract.AnnotationEpoch: strconv.FormatInt(mdb.Spec.Epoch, 10),
			contract.AnnotationSynchronous:         contract.FormatSynchronous(durability, number),
			contract.AnnotationSynchronousStandbys: strings.Join(remote, ","),
			// With the epoch, never after it: a pod primary at the new epoch without its
			// promotion token would promote at once, before it has the old primary's last WAL.
			contract.AnnotationPromoteAfterLSN: mdb.Spec.PromoteAfterLSN}
		if role == contract.PodRolePrimary {
			primary = pod
		} else {
			standbys = append(standbys, pod.Name)
		}
	}
	if primary == nil {
		if mdb.Spec.PrimaryEndpoint != "" {
			for _, name := range standbys {
				out[name][contract.AnnotationPrimaryEndpoint] = mdb.Spec.PrimaryEndpoint
			}
		}
		return out
	}
	local := slices.Clone(standbys)
	for _, name := range mdb.Spec.Standbys {
		if name != primary.Name && !slices.Contains(standbys, name) {
			standbys = append(standbys, name)
		}
	}
	sort.Strings(standbys)
	out[primary.Name][contract.AnnotationStandbys] = strings.Join(standbys, ",")
	standbys = local
	if primary.Status.PodIP != "" {
		endpoint := net.JoinHostPort(primary.Status.PodIP, strconv.Itoa(int(engines[dbfleetv1alpha1.EnginePostgres].port)))
		for _, name := range standbys {
			out[name][contract.AnnotationPrimaryEndpoint] = endpoint
		}
	}
	return out
}

// annotateInstancePods writes desiredInstanceAnnotations onto the share's pods, leaving others'
// annotations alone.
func annotateInstancePods(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase) error {
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods, client.InNamespace(mdb.Spec.DatabaseRef.Namespace), client.MatchingLabels(selectorLabels(mdb))); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	want := desiredInstanceAnnotations(mdb, pods.Items)
	for i := range pods.Items {
		pod := &pods.Items[i]
		w, ok := want[pod.Name]
		if !ok {
			continue
		}
		changed := false
		for k, v := range w {
			if pod.Annotations[k] != v {
				changed = true
			}
		}
		if !changed {
			continue
		}
		patched := pod.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		maps.Copy(patched.Annotations, w)
		if err := member.Patch(ctx, patched, client.MergeFrom(pod)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("annotate pod %s: %w", pod.Name, err)
		}
	}
	return nil
}

// sharePodNames are the names the share's StatefulSet gives its pods: <db>-<ordinal> for the
// share's ordinals.
func sharePodNames(mdb *dbfleetv1alpha1.MemberDatabase) []string {
	names := make([]string, 0, mdb.Spec.Replicas)
	for i := range mdb.Spec.Replicas {
		names = append(names, contract.PodName(mdb.Spec.DatabaseRef.Name, mdb.Spec.Ordinals.Start+i))
	}
	return names
}
