package specs

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// StatusPortName is the name of the container port on which a pod's instance manager serves
// /status; the agent reads it from each pod's spec.
const StatusPortName = "status"

// Where the instance manager's pieces go in a postgres pod.
const (
	instanceBinVolume = "dbfleet-bin"
	instanceBinDir    = "/dbfleet"
	secretsDir        = "/etc/dbfleet/secrets"
	// InitContainerName copies dbfleet-instance into the shared emptyDir.
	InitContainerName = "bootstrap-instance"
)

// WithInstanceManager turns a postgres StatefulSet into one whose database container runs
// dbfleet-instance as PID 1: an init container of image (the agent's) copies the binary into an
// emptyDir, the container runs it with its settings in the environment, the credentials Secrets
// are mounted, it serves /status on the "status" port over HTTPS (to the agent's client
// certificate alone), and readiness is the instance's /readyz (a primary that takes writes, a
// standby that streams; the kubelet probes HTTPS without verifying, as it does). The pods run
// as the instance's ServiceAccount, never as another (the API refuses
// spec.template.serviceAccountName).
func WithInstanceManager(sts *appsv1.StatefulSet, mdb *dbfleetv1alpha1.MemberDatabase, image, cluster string) {
	db := mdb.Spec.DatabaseRef.Name
	spec := &sts.Spec.Template.Spec
	spec.ServiceAccountName = InstanceServiceAccountName(db)
	spec.SecurityContext = restrictedPod(postgresIDs(&mdb.Spec.Database))
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: instanceBinVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.InitContainers = append(spec.InitContainers, corev1.Container{
		Name:            InitContainerName,
		Image:           image,
		Command:         []string{"/dbfleet-instance", "--copy-to=" + instanceBinDir},
		VolumeMounts:    []corev1.VolumeMount{{Name: instanceBinVolume, MountPath: instanceBinDir}},
		SecurityContext: restrictedContainer(),
	})
	c := &spec.Containers[0]
	c.SecurityContext = restrictedContainer()
	c.Name = "postgres"
	c.Command = []string{instanceBinDir + "/dbfleet-instance"}
	c.Args = nil
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: instanceBinVolume, MountPath: instanceBinDir, ReadOnly: true})
	secretDirEnv := map[string]string{
		dbfleetv1alpha1.CredentialsSuperuser:   contract.EnvSuperuserSecretDir,
		dbfleetv1alpha1.CredentialsReplication: contract.EnvReplicationSecretDir,
		dbfleetv1alpha1.CredentialsApp:         contract.EnvAppSecretDir,
		dbfleetv1alpha1.CredentialsTLS:         contract.EnvTLSSecretDir,
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
		source := &corev1.SecretVolumeSource{SecretName: dbfleetv1alpha1.CredentialsSecretName(db, kind), DefaultMode: ptr.To[int32](0o440)}
		if kind == dbfleetv1alpha1.CredentialsTLS {
			// Not the agent's client certificate: an instance has no business reading another's
			// /status.
			for _, key := range contract.InstanceTLSKeys {
				source.Items = append(source.Items, corev1.KeyToPath{Key: key, Path: key})
			}
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: source}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: secretDirEnv[kind], Value: dir})
	}
	// The user's environment comes last, so it may override (a bin dir, say), never replace ours.
	c.Env = append(env, c.Env...)
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: StatusPortName, ContainerPort: contract.Port})
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: contract.ReadyPath, Port: intstr.FromString(StatusPortName), Scheme: corev1.URISchemeHTTPS}},
		PeriodSeconds: 2, FailureThreshold: 3, TimeoutSeconds: 3,
	}
	// A restart is the worst answer to a busy node: it kills an initdb, a pg_basebackup or a
	// crash recovery half-way, and the next attempt is as slow. With the default 1 s timeout, ten
	// databases bootstrapping at once on two cores had every instance restarted over and over
	// and none ever Ready. /healthz answers as soon as the manager runs, so it only has to answer
	// within 5 s, once in a minute.
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: contract.HealthPath, Port: intstr.FromString(StatusPortName), Scheme: corev1.URISchemeHTTPS}},
		PeriodSeconds: 10, FailureThreshold: 6, TimeoutSeconds: 5,
	}
}
