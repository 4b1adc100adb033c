package member

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// Labels the agent sets on what it creates in a member cluster.
const (
	// LabelManagedBy marks objects the agent created; it acts on nothing without it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByAgent is LabelManagedBy's value.
	ManagedByAgent = "dbfleet-agent"
	// LabelInstance is the standard instance label, the DatabaseCluster name.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelName is the standard name label, the engine.
	LabelName = "app.kubernetes.io/name"
)

// engine describes what the agent needs to know of a known engine.
type engine struct {
	image   string
	port    int32
	dataDir string
}

var engines = map[dbfleetv1alpha1.Engine]engine{
	dbfleetv1alpha1.EnginePostgres: {image: "postgres", port: 5432, dataDir: "/var/lib/postgresql/data"},
	dbfleetv1alpha1.EngineMySQL:    {image: "mysql", port: 3306, dataDir: "/var/lib/mysql"},
	dbfleetv1alpha1.EngineCustom:   {port: 5432, dataDir: "/data"},
}

// Image is the container image of the database: spec.image, else the engine's image at version.
func Image(t *dbfleetv1alpha1.DatabaseTemplate) string {
	if t.Image != "" {
		return t.Image
	}
	return engines[t.Engine].image + ":" + t.Version
}

// selectorLabels select the pods of one database in a member cluster.
func selectorLabels(mdb *dbfleetv1alpha1.MemberDatabase) map[string]string {
	return map[string]string{
		dbfleetv1alpha1.LabelDatabase: mdb.Spec.DatabaseRef.Name,
		LabelInstance:                 mdb.Spec.DatabaseRef.Name,
	}
}

// objectLabels are set on every object the agent creates for a database.
func objectLabels(mdb *dbfleetv1alpha1.MemberDatabase) map[string]string {
	l := selectorLabels(mdb)
	l[LabelManagedBy] = ManagedByAgent
	l[LabelName] = string(mdb.Spec.Database.Engine)
	return l
}

// AnnotationFencedEpoch on a StatefulSet records that the agent fenced the share's primary at
// that epoch; it stays until the hub hands the share a higher epoch, across agent restarts.
const AnnotationFencedEpoch = "dbfleet.io/fenced-epoch"

// DesiredStatefulSet is the StatefulSet a MemberDatabase calls for. Its ordinals start at the
// share's fleet-wide start, so pod names are unique across the fleet. fencedAt, when non-zero,
// is the epoch at which the share's primary was fenced.
func DesiredStatefulSet(mdb *dbfleetv1alpha1.MemberDatabase, fencedAt int64) *appsv1.StatefulSet {
	db := &mdb.Spec.Database
	eng := engines[db.Engine]
	labels := objectLabels(mdb)
	stsLabels := objectLabels(mdb)
	stsLabels[dbfleetv1alpha1.LabelEpoch] = strconv.FormatInt(mdb.Spec.Epoch, 10)

	podLabels := map[string]string{}
	podAnnotations := map[string]string{}
	spec := corev1.PodSpec{}
	container := corev1.Container{
		Name:         "database",
		Image:        Image(db),
		Ports:        []corev1.ContainerPort{{Name: "db", ContainerPort: eng.port}},
		Resources:    db.Resources,
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: eng.dataDir}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("db")},
		}},
	}
	if t := db.Template; t != nil {
		for k, v := range t.Labels {
			podLabels[k] = v
		}
		for k, v := range t.Annotations {
			podAnnotations[k] = v
		}
		spec.NodeSelector = t.NodeSelector
		spec.Tolerations = t.Tolerations
		spec.Affinity = t.Affinity
		spec.PriorityClassName = t.PriorityClassName
		spec.ServiceAccountName = t.ServiceAccountName
		container.Env = t.Env
		container.Args = t.Args
	}
	for k, v := range labels { // ours win over the user's
		podLabels[k] = v
	}
	spec.Containers = []corev1.Container{container}

	var annotations map[string]string
	if fencedAt > 0 {
		annotations = map[string]string{AnnotationFencedEpoch: strconv.FormatInt(fencedAt, 10)}
	}
	retention := db.Storage.RetentionPolicy
	return &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   mdb.Spec.DatabaseRef.Namespace,
			Name:        mdb.Spec.DatabaseRef.Name,
			Labels:      stsLabels,
			Annotations: annotations,
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(mdb.Spec.Replicas),
			Ordinals:    &appsv1.StatefulSetOrdinals{Start: mdb.Spec.Ordinals.Start},
			ServiceName: mdb.Spec.DatabaseRef.Name,
			// Replicas of a database join on their own; waiting for each in turn only slows
			// recovery after a failover.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: selectorLabels(mdb)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec:       spec,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: selectorLabels(mdb)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: db.Storage.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: db.Storage.Size},
					},
				},
			}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: retentionType(retention.WhenDeleted),
				WhenScaled:  retentionType(retention.WhenScaled),
			},
		},
	}
}

func retentionType(p dbfleetv1alpha1.PVCRetentionPolicyType) appsv1.PersistentVolumeClaimRetentionPolicyType {
	if p == dbfleetv1alpha1.DeletePVC {
		return appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	return appsv1.RetainPersistentVolumeClaimRetentionPolicyType // never lose data by default
}

// DesiredService is the headless Service giving each pod a stable DNS name.
func DesiredService(mdb *dbfleetv1alpha1.MemberDatabase) *corev1.Service {
	port := engines[mdb.Spec.Database.Engine].port
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: mdb.Spec.DatabaseRef.Namespace,
			Name:      mdb.Spec.DatabaseRef.Name,
			Labels:    objectLabels(mdb),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selectorLabels(mdb),
			PublishNotReadyAddresses: true, // replicas must find each other before they are ready
			Ports:                    []corev1.ServicePort{{Name: "db", Port: port, TargetPort: intstr.FromString("db")}},
		},
	}
}

// PrimaryPDBName and ReplicaPDBName name the two PodDisruptionBudgets of a database.
func PrimaryPDBName(db string) string { return db + "-primary" }
func ReplicaPDBName(db string) string { return db + "-replica" }

// DesiredPDBs are the budgets of a share: voluntary disruptions never take the primary pod (only
// the primary cluster's share gets that budget), and take replicas one at a time.
func DesiredPDBs(mdb *dbfleetv1alpha1.MemberDatabase) []*policyv1.PodDisruptionBudget {
	pdb := func(name, role string, spec policyv1.PodDisruptionBudgetSpec) *policyv1.PodDisruptionBudget {
		sel := selectorLabels(mdb)
		sel[contract.LabelRole] = role
		spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
		return &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: name, Labels: objectLabels(mdb)},
			Spec:       spec,
		}
	}
	pdbs := []*policyv1.PodDisruptionBudget{
		pdb(ReplicaPDBName(mdb.Spec.DatabaseRef.Name), contract.PodRoleReplica,
			policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}),
	}
	if mdb.Spec.Role == dbfleetv1alpha1.RolePrimary {
		pdbs = append(pdbs, pdb(PrimaryPDBName(mdb.Spec.DatabaseRef.Name), contract.PodRolePrimary,
			policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}))
	}
	return pdbs
}

// PrimaryOrdinal is the ordinal of a primary share's primary pod: spec.primaryOrdinal, which the
// hub sets to the instance furthest in the WAL when it promotes the share, or the share's lowest
// ordinal when it is absent.
func PrimaryOrdinal(mdb *dbfleetv1alpha1.MemberDatabase) int32 {
	if o := mdb.Spec.PrimaryOrdinal; o != nil {
		return *o
	}
	return mdb.Spec.Ordinals.Start
}

// PodRole is the role label (contract.LabelRole) a pod of the share should carry: the pod at
// PrimaryOrdinal is the primary when the share holds the primary (fenced when the agent fenced
// it); every other pod is a replica. The PDBs and the client Services select on this label, and the instance manager
// reads it to know whether its pod is the primary.
func PodRole(mdb *dbfleetv1alpha1.MemberDatabase, podName string, fenced bool) (string, error) {
	ordinal, ok := contract.PodOrdinal(mdb.Spec.DatabaseRef.Name, podName)
	if !ok {
		return "", fmt.Errorf("pod %s is not one of StatefulSet %s's pods (<name>-<ordinal>)", podName, mdb.Spec.DatabaseRef.Name)
	}
	if mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && ordinal == PrimaryOrdinal(mdb) {
		if fenced {
			return contract.PodRoleFenced, nil
		}
		return contract.PodRolePrimary, nil
	}
	return contract.PodRoleReplica, nil
}
