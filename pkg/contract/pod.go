package contract

import (
	"fmt"
	"strconv"
	"strings"
)

// LabelRole is the role the agent gives a database pod: PodRolePrimary for the primary pod of the
// primary cluster's share, PodRoleFenced once that primary is fenced, PodRoleReplica otherwise.
// The instance manager runs as primary only on a pod labelled primary.
const LabelRole = "dbfleet.io/role"

// Values of LabelRole. They are the MemberDatabase roles (api/v1alpha1 RolePrimary, RoleReplica,
// RoleFenced) of the pod's share.
const (
	PodRolePrimary = "primary"
	PodRoleReplica = "replica"
	PodRoleFenced  = "fenced"
)

// LabelInstanceRole is the role a pod's instance manager reports it really runs (from its /status:
// InstanceRolePrimary or InstanceRoleStandby), set by the agent. The read-write Service selects
// the pod labelled primary by the hub's placement (LabelRole) only while its instance also says
// so here.
const LabelInstanceRole = "dbfleet.io/instance-role"

// Values of LabelInstanceRole.
const (
	InstanceRolePrimary = "primary"
	InstanceRoleStandby = "standby"
)

// The pod annotations the agent writes and the instance manager reads.
const (
	// AnnotationEpoch is the primary epoch the pod's role belongs to, in decimal (FormatEpoch).
	AnnotationEpoch = "dbfleet.io/epoch"
	// AnnotationPrimaryEndpoint is host:port of the current primary, which a standby follows and
	// a new instance clones from.
	AnnotationPrimaryEndpoint = "dbfleet.io/primary-endpoint"
	// AnnotationStandbys lists the application names (pod names) of the standbys the primary keeps
	// a replication slot for (FormatNames).
	AnnotationStandbys = "dbfleet.io/standbys"
	// AnnotationSynchronous is the primary pod's synchronous replication, "<dataDurability>
	// <number>" (FormatSynchronous, e.g. "required 1"); empty or absent: asynchronous.
	AnnotationSynchronous = "dbfleet.io/synchronous"
	// AnnotationSynchronousStandbys lists the standbys a synchronous primary counts: the pods of
	// the other clusters' shares (FormatNames).
	AnnotationSynchronousStandbys = "dbfleet.io/synchronous-standbys"
	// AnnotationPromoteAfterLSN is a planned switchover's promotion token on the new primary's
	// pods: the old primary's final LSN, which the standby replays past before it promotes. It
	// arrives in the same patch as the epoch it belongs to.
	AnnotationPromoteAfterLSN = "dbfleet.io/promote-after-lsn"
)

// FormatEpoch is the value of AnnotationEpoch.
func FormatEpoch(epoch int64) string { return strconv.FormatInt(epoch, 10) }

// ParseEpoch reads AnnotationEpoch; 0 when it is absent or not a positive number.
func ParseEpoch(v string) int64 {
	e, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || e < 0 {
		return 0
	}
	return e
}

// FormatNames is the value of a list annotation (AnnotationStandbys,
// AnnotationSynchronousStandbys): the names, comma-separated.
func FormatNames(names []string) string { return strings.Join(names, ",") }

// ParseNames splits a list annotation, dropping empty items.
func ParseNames(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Data durability of synchronous replication: the values of api/v1alpha1 DataDurability, as
// AnnotationSynchronous and the /status body carry them.
const (
	DurabilityRequired  = "required"
	DurabilityPreferred = "preferred"
)

// FormatSynchronous is the value of AnnotationSynchronous: empty (asynchronous) unless both a
// durability and a positive number are given.
func FormatSynchronous(durability string, number int) string {
	if durability == "" || number <= 0 {
		return ""
	}
	return fmt.Sprintf("%s %d", durability, number)
}

// ParseSynchronous reads AnnotationSynchronous; a malformed value is asynchronous ("", 0).
func ParseSynchronous(v string) (durability string, number int) {
	durability, n, ok := strings.Cut(strings.TrimSpace(v), " ")
	number, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || number <= 0 || (durability != DurabilityRequired && durability != DurabilityPreferred) {
		return "", 0
	}
	return durability, number
}

// PodName is the name a share's StatefulSet gives the pod of an ordinal: "<db>-<ordinal>". Shares
// get fleet-wide unique ordinals, so pod names are unique across the fleet; a pod's name is also
// its replication application_name.
func PodName(db string, ordinal int32) string {
	return db + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// PodOrdinal reads the ordinal out of a pod name "<db>-<ordinal>"; ok is false when the name is
// not one of db's pods.
func PodOrdinal(db, pod string) (ordinal int32, ok bool) {
	rest, found := strings.CutPrefix(pod, db+"-")
	if !found {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 || rest != strconv.FormatInt(n, 10) {
		return 0, false
	}
	return int32(n), true
}
