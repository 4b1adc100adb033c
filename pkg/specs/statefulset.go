package specs

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// AnnotationFencedEpoch on a StatefulSet records that the agent fenced the share's primary at
// that epoch; it stays until the hub hands the share a higher epoch, across agent restarts.
const AnnotationFencedEpoch = "dbfleet.io/fenced-epoch"

// StatefulSet is the StatefulSet a MemberDatabase calls for. Its ordinals start at the share's
// fleet-wide start, so pod names are unique across the fleet. fencedAt, when non-zero, is the
// epoch at which the share's primary was fenced.
func StatefulSet(mdb *dbfleetv1alpha1.MemberDatabase, fencedAt int64) *appsv1.StatefulSet {
	db := &mdb.Spec.Database
	eng := engines[db.Engine]
	labels := ObjectLabels(mdb)
	stsLabels := ObjectLabels(mdb)
	stsLabels[dbfleetv1alpha1.LabelEpoch] = strconv.FormatInt(mdb.Spec.Epoch, 10)

	podLabels := map[string]string{}
	podAnnotations := map[string]string{}
	spec := corev1.PodSpec{}
	container := corev1.Container{
		Name:         "database",
		Image:        Image(db),
		Ports:        []corev1.ContainerPort{{Name: "db", ContainerPort: eng.port}},
		Resources:    db.Resources,
		VolumeMounts: []corev1.VolumeMount{{Name: dataClaim, MountPath: eng.dataDir}},
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
			Selector:            &metav1.LabelSelector{MatchLabels: SelectorLabels(mdb)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec:       spec,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: dataClaim, Labels: SelectorLabels(mdb)},
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
