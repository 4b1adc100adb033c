package member

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// reports remembers, per MemberDatabase, the status the agent last wrote and the resourceVersion
// the hub gave that write, until the agent's cache of the hub has shown that version.
//
// A status write is often followed at once by another reconcile of the same share (the
// StatefulSet the agent just created in the member changes), which reads the MemberDatabase from
// a cache that does not have the write yet. Computed against that older status, the same report
// looked new and was written again: 2.9 status writes per MemberDatabase at 10,000 databases
// instead of 2. Only the status is taken from the last write; the rest of the pass (applying,
// fencing, the primary Lease) still runs on what the cache shows, so a hub watch that is behind
// never holds up fencing. Only the agent writes MemberDatabase status, so its last write is what
// the hub has.
type reports struct {
	last sync.Map // types.NamespacedName → *report (a pointer: CompareAndDelete compares the values)
}

type report struct {
	resourceVersion string
	status          dbfleetv1alpha1.MemberDatabaseStatus
}

// wrote records the status the hub accepted for mdb (mdb as the write returned it).
func (r *reports) wrote(mdb *dbfleetv1alpha1.MemberDatabase) {
	if mdb.ResourceVersion == "" {
		return
	}
	r.last.Store(types.NamespacedName{Namespace: mdb.Namespace, Name: mdb.Name},
		&report{resourceVersion: mdb.ResourceVersion, status: *mdb.Status.DeepCopy()})
}

// catchUp gives mdb, read from the cache, the status of the agent's last write when the cache has
// not shown that write yet, and reports whether it did. Once the cache has caught up the write is
// forgotten. Versions that are not comparable integers are never called behind (KEP-5504).
func (r *reports) catchUp(mdb *dbfleetv1alpha1.MemberDatabase) bool {
	key := types.NamespacedName{Namespace: mdb.Namespace, Name: mdb.Name}
	v, ok := r.last.Load(key)
	if !ok {
		return false
	}
	last := v.(*report)
	if cmp, err := resourceversion.CompareResourceVersion(mdb.ResourceVersion, last.resourceVersion); err == nil && cmp < 0 {
		last.status.DeepCopyInto(&mdb.Status)
		return true
	}
	r.last.CompareAndDelete(key, v)
	return false
}

// forget drops what is remembered of a share that is going away.
func (r *reports) forget(key types.NamespacedName) {
	r.last.Delete(key)
}
