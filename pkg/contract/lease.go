package contract

import (
	"strconv"
	"strings"
	"time"
)

// PrimaryLeaseName is the member-local Lease, in the database's namespace, under which the primary
// of database db may take writes. The agent renews it; the instance manager reads it.
func PrimaryLeaseName(db string) string { return "dbfleet-primary-" + db }

// Holder is the holder identity of the primary Lease of the given cluster at an epoch:
// "<cluster>/<epoch>". An instance writes only while the Lease names its own cluster and epoch.
func Holder(cluster string, epoch int64) string { return cluster + "/" + strconv.FormatInt(epoch, 10) }

// ParseHolder reads a Holder; ok is false when h is not "<cluster>/<epoch>" with a positive epoch.
func ParseHolder(h string) (cluster string, epoch int64, ok bool) {
	cluster, e, found := strings.Cut(h, "/")
	if !found || cluster == "" {
		return "", 0, false
	}
	epoch, err := strconv.ParseInt(e, 10, 64)
	if err != nil || epoch <= 0 {
		return "", 0, false
	}
	return cluster, epoch, true
}

// The clock allowances of the primary Lease. The agent counts with them when it judges a Lease
// it could not renew certainly lapsed; the instance fences by them.
const (
	// MaxClockSkew is how far in an instance's future a Lease renewTime may lie and still be
	// trusted. Clocks within one member cluster must agree this closely; a renewTime further
	// ahead makes the Lease invalid (ReasonClockSkew), so a wrong agent clock can only fence early.
	MaxClockSkew = time.Second
	// FenceSafety is how long before the Lease expires the instance has stopped taking writes.
	FenceSafety = 2 * time.Second
)
