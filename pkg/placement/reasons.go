package placement

// Reasons a cluster gets no replica. They are short phrases meant to be counted: an
// UnschedulableError reads "0/5 clusters fit: 2 unreachable (dbfleet.io/unreachable), 3 excluded by
// clusterAffinity". A cluster with an untolerated taint other than the two below gets the reason
// "untolerated taint <key>=<value>:<effect>".
const (
	// ReasonClusterAffinity: clusterAffinity (or the clusterAffinities term in use) rejects the cluster.
	ReasonClusterAffinity = "excluded by clusterAffinity"
	// ReasonUnreachable: the hub's dbfleet.io/unreachable NoExecute taint is not tolerated, its
	// toleration has expired, or (while the toleration counts down) the cluster may not gain replicas.
	ReasonUnreachable = "unreachable (dbfleet.io/unreachable)"
	// ReasonNotReadyTaint: the same for the hub's dbfleet.io/not-ready taint.
	ReasonNotReadyTaint = "not ready (dbfleet.io/not-ready)"
	// ReasonNotReady: the cluster's Ready condition is not True, so it gets no new replicas.
	ReasonNotReady = "not ready"
	// ReasonMissingRegion and its siblings: a spread constraint groups clusters by a field the
	// cluster leaves empty (Karmada's SpreadConstraint filter).
	ReasonMissingRegion   = "no region for spreadConstraints"
	ReasonMissingZone     = "no zone for spreadConstraints"
	ReasonMissingProvider = "no provider for spreadConstraints"
	// ReasonNotSelected: the cluster fits, but spreadConstraints chose other clusters.
	ReasonNotSelected = "not selected by spreadConstraints"
	// ReasonNoWeight: staticWeightList gives the cluster no weight.
	ReasonNoWeight = "no weight in staticWeightList"
	// ReasonNoCapacity: the cluster has no room for another replica of this database.
	ReasonNoCapacity = "no available replicas"
	// ReasonNotNeeded: Aggregated packs the replicas into as few clusters as possible and this
	// one was not needed.
	ReasonNotNeeded = "not needed by Aggregated division"
	// ReasonAlreadyPlaced: with dynamic weights or Aggregated, the replicas did not grow, so the
	// clusters already holding them keep them (Karmada's Steady mode) and this one gets none.
	ReasonAlreadyPlaced = "replicas already placed elsewhere"
	// ReasonRoundedToZero: the divisor method gave the cluster's weight no replica.
	ReasonRoundedToZero = "weight too small for a replica"
	// ReasonNoReplicas: the database asks for zero replicas.
	ReasonNoReplicas = "no replicas requested"
)

// explanation is a reason with its message. Decisions share explanations between clusters: most
// are the fixed ones below, the rest are built once per decision.
type explanation struct{ reason, message string }

// explID numbers an explanation within one decision (see whyTable). Nodes hold it rather than a
// pointer so that the node table contains no pointers: marking thousands of clusters then costs
// no write barriers while the garbage collector runs, and the collector need not scan the table.
type explID uint32

// The explanations every decision may use, numbered the same in every decision.
const (
	whyNone explID = iota // the cluster has no explanation (yet)
	whyNotReady
	whyNotSelected
	whyNoWeight
	whyNoCapacity
	whyNotNeeded
	whyAlreadyPlaced
	whyRoundedToZero
	whyNoReplicas
	whyMissingProvider
	whyMissingRegion
	whyMissingZone
	numFixedWhys
)

var fixedWhys = [numFixedWhys]explanation{
	whyNotReady:        {ReasonNotReady, "the cluster is not Ready"},
	whyNotSelected:     {ReasonNotSelected, "spreadConstraints chose other clusters"},
	whyNoWeight:        {ReasonNoWeight, "no staticWeightList entry matches the cluster"},
	whyNoCapacity:      {ReasonNoCapacity, "the cluster has no room for another replica of this database"},
	whyNotNeeded:       {ReasonNotNeeded, "Aggregated keeps the replicas in as few clusters as possible"},
	whyAlreadyPlaced:   {ReasonAlreadyPlaced, "the clusters already holding replicas keep them: steady scheduling moves none"},
	whyRoundedToZero:   {ReasonRoundedToZero, "the divisor method gave its weight no replica"},
	whyNoReplicas:      {ReasonNoReplicas, "spec.replicas is 0"},
	whyMissingProvider: {ReasonMissingProvider, "a spread constraint groups clusters by provider and the cluster has none"},
	whyMissingRegion:   {ReasonMissingRegion, "a spread constraint groups clusters by region and the cluster has none"},
	whyMissingZone:     {ReasonMissingZone, "a spread constraint groups clusters by zone and the cluster has none"},
}

// whyTable holds one decision's explanations, indexed by explID: the fixed ones, then those built
// for this decision (affinity terms, taints), each added once however many clusters share it.
type whyTable []explanation

func (t *whyTable) reset() { *t = append((*t)[:0], fixedWhys[:]...) }

func (t *whyTable) add(e explanation) explID {
	*t = append(*t, e)
	return explID(len(*t) - 1)
}
