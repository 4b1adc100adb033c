package placement

import (
	"cmp"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Cluster is the snapshot of one MemberCluster that the engine needs. The caller builds it (see
// ClusterFromMember); the engine never reads the API itself.
type Cluster struct {
	// Name of the MemberCluster.
	Name string
	// Labels of the MemberCluster, for clusterAffinity.labelSelector and staticWeightList.
	Labels map[string]string
	// Region, Zone and Provider of the cluster, for fieldSelector and spreadConstraints.
	Region, Zone, Provider string
	// Taints of the cluster, matched against the placement's clusterTolerations.
	Taints []corev1.Taint
	// Ready is the cluster's Ready condition. An unready cluster gets no new replicas; it keeps
	// what it already has until a NoExecute taint evicts it.
	Ready bool
	// AvailableReplicas is how many more replicas of this database the cluster can take on top of
	// everything already running there (see AvailableReplicas). Ignored when Unlimited.
	AvailableReplicas int32
	// Unlimited says the database requests no resources, so capacity does not limit the cluster.
	Unlimited bool
}

// Input is everything one placement decision depends on. Schedule is a pure function of it.
type Input struct {
	// Replicas is the DatabaseCluster's spec.replicas.
	Replicas int32
	// PreferredPrimaries is spec.primary.preferredClusters, most preferred first.
	PreferredPrimaries []string
	// Switchover asks for a planned switchover: the primary moves to the first preferred cluster
	// that holds a replica and is ready, even though the current primary is healthy. The caller
	// sets it when the first preferred cluster changed since the previous decision.
	Switchover bool
	// SwitchoverTo asks for a planned switchover to one of these clusters (the hub's version
	// roll hands the primary to a share already on the new version): while the current primary
	// is healthy, it moves to the best of them that holds a replica and is healthy, in the order
	// a primary that has to move is chosen (WAL progress, preference, replicas, name); if none
	// can take it, it stays. It comes before Switchover. It never steers a failover: when the
	// current primary is not healthy, the primary is chosen as if it were empty.
	SwitchoverTo []string
	// NoPrimary are clusters that may keep replicas but not hold the primary while listed (the
	// hub lists those whose clocks disagree with their instances': a primary there would refuse
	// its Lease). They count as unhealthy for the primary's choice only: a primary on one moves
	// to the best healthy holder, as it would off a failed cluster, and stays only when no
	// other holder is healthy.
	NoPrimary []string
	// Placement is the matched policy's placement.
	Placement policyv1alpha1.Placement
	// Clusters is the fleet, in any order.
	Clusters []Cluster
	// Previous is the decision currently in force (nil for a new database). The engine keeps as
	// much of it as the placement allows.
	Previous *Decision
	// ReservedOrdinals are ordinal ranges still in use outside Previous, for example by shares
	// being drained after an eviction. New ranges never overlap them.
	ReservedOrdinals []v1alpha1.OrdinalRange
	// DefaultTolerationSeconds is how long the hub's health taints are tolerated when the placement
	// has no toleration of its own for them; nil means DefaultTolerationSeconds.
	DefaultTolerationSeconds *int64
	// Now is the time NoExecute tolerations are measured against (taint.timeAdded + tolerationSeconds).
	Now time.Time
	// Progress is, by cluster, how far the most advanced instance of its share has come in the
	// primary's WAL, as its agent last reported. When the primary has to move, it goes to the
	// share that has come furthest (the least data lost), before preference and size. Clusters
	// missing from it count as having nothing.
	Progress map[string]WALProgress
}

// WALProgress is how far an instance has received and replayed the primary's WAL, as byte
// positions (an LSN "X/Y" is X<<32 + Y).
type WALProgress struct {
	Received, Replayed uint64
}

// Compare orders progress: received first, then replayed (CloudNativePG's order).
func (p WALProgress) Compare(q WALProgress) int {
	if c := cmp.Compare(p.Received, q.Received); c != 0 {
		return c
	}
	return cmp.Compare(p.Replayed, q.Replayed)
}

// Decision is where the replicas of one DatabaseCluster go.
type Decision struct {
	// Shares are the clusters that run replicas, sorted by cluster name. Every share has at least
	// one replica and ordinal ranges never overlap.
	Shares []Share
	// Primary is the cluster whose share holds the primary (the hub picks the pod); empty when
	// there are no shares.
	Primary string
	// Excluded names every input cluster without a share and why, sorted by cluster name.
	Excluded []Exclusion
	// AffinityName is the clusterAffinities term that was used; empty with clusterAffinity.
	AffinityName string
}

// Share is one cluster's part of a DatabaseCluster.
type Share struct {
	Cluster  string
	Replicas int32
	// Ordinals are the StatefulSet ordinals of the share: start is spec.ordinals.start and count
	// equals Replicas.
	Ordinals v1alpha1.OrdinalRange
}

// Exclusion explains why a cluster got no replica.
type Exclusion struct {
	Cluster string
	// Reason is a short, stable phrase that groups clusters excluded for the same cause, for
	// example "excluded by clusterAffinity" or "unreachable (dbfleet.io/unreachable)".
	Reason string
	// Message is the detail for this cluster.
	Message string
}

// ShareOf returns the replicas the decision gives the named cluster (0 when none).
func (d *Decision) ShareOf(cluster string) int32 {
	if d == nil {
		return 0
	}
	for i := range d.Shares {
		if d.Shares[i].Cluster == cluster {
			return d.Shares[i].Replicas
		}
	}
	return 0
}

// TotalReplicas is the sum of the shares.
func (d *Decision) TotalReplicas() int32 {
	if d == nil {
		return 0
	}
	var sum int32
	for i := range d.Shares {
		sum += d.Shares[i].Replicas
	}
	return sum
}
