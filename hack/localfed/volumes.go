package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// A member has no volume provisioner, and a StatefulSet Pod whose claim stays Pending is never
// scheduled. Each member therefore gets a default StorageClass "localfed" (no provisioner,
// immediate binding) and a pool of pre-made PersistentVolumes of that class, which the PV binder of
// kube-controller-manager binds to the databases' claims. With kwok nothing is ever mounted (it
// runs no containers), so the volumes are hostPath placeholders; real nodes get real ones.

const (
	storageClass = "localfed"
	volumeSize   = "100Gi"
)

func createVolumes(ctx context.Context, cs kubernetes.Interface, m layout.Member, volumes int) error {
	if err := createStorageClass(ctx, cs); err != nil {
		return err
	}
	for i := range volumes {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("localfed-%03d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(volumeSize)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              storageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: fmt.Sprintf("/var/lib/localfed/%s/%03d", m.Name, i)}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func createStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: storageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createRealVolumes makes the volumes of a member with real nodes: local PersistentVolumes, each a
// directory under its node's state (nodes/<node>/volumes/NNN), spread over the nodes and bound to
// theirs by node affinity. The directories are world-writable because the engine's user (postgres,
// uid 999, in the image) must create its data directory there, and a local volume ignores fsGroup.
func createRealVolumes(ctx context.Context, cs kubernetes.Interface, d layout.Dir, nodes []layout.Node, volumes int) error {
	if err := createStorageClass(ctx, cs); err != nil {
		return err
	}
	for i := range volumes {
		node := nodes[i%len(nodes)]
		path := filepath.Join(nodeFiles{dir: d.NodeDir(node.Name)}.volumes(), fmt.Sprintf("%03d", i))
		if err := os.MkdirAll(path, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(path, 0o777); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("localfed-%03d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(volumeSize)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              storageClass,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name}}},
				}}}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
