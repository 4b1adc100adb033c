package specs

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

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
// it); every other pod is a replica. The PDBs and the client Services select on this label, and
// the instance manager reads it to know whether its pod is the primary.
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

// sharePodNames are the names the share's StatefulSet gives its pods: <db>-<ordinal> for the
// share's ordinals.
func sharePodNames(mdb *dbfleetv1alpha1.MemberDatabase) []string {
	names := make([]string, 0, mdb.Spec.Replicas)
	for i := range mdb.Spec.Replicas {
		names = append(names, contract.PodName(mdb.Spec.DatabaseRef.Name, mdb.Spec.Ordinals.Start+i))
	}
	return names
}

// InstanceAnnotations are the annotations each pod's instance manager reads (package
// pkg/instance/observe), by pod name: every pod gets the share's epoch, its promotion token
// (spec.promoteAfterLSN, a planned switchover's: only the primary pod acts on it) and its synchronous
// replication (spec.database.postgres.synchronous, counting the other clusters' pods of
// spec.standbys, which only the primary share has); in the primary
// cluster's share, the standbys get the primary pod's address as their primary endpoint once it
// has one, and the primary pod the names of the share's standbys and of the other clusters'
// (spec.standbys, from the hub), for which it keeps replication slots. In the other clusters'
// shares, the standbys follow spec.primaryEndpoint, which the hub writes from the primary
// share's status.endpoints.readWrite.
func InstanceAnnotations(mdb *dbfleetv1alpha1.MemberDatabase, pods []corev1.Pod) map[string]map[string]string {
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
