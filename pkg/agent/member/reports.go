package member

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/ownwrites"
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
	last ownwrites.Tracker
}

// wrote records the status the hub accepted for mdb (mdb as the write returned it).
func (r *reports) wrote(mdb *dbfleetv1alpha1.MemberDatabase) {
	r.last.WroteValue(client.ObjectKeyFromObject(mdb), mdb.ResourceVersion, mdb.Status.DeepCopy())
}

// catchUp gives mdb, read from the cache, the status of the agent's last write when the cache has
// not shown that write yet. Once the cache has caught up the write is forgotten.
func (r *reports) catchUp(mdb *dbfleetv1alpha1.MemberDatabase) {
	if v, behind := r.last.Last(client.ObjectKeyFromObject(mdb), mdb.ResourceVersion); behind {
		v.(*dbfleetv1alpha1.MemberDatabaseStatus).DeepCopyInto(&mdb.Status)
	}
}

// forget drops what is remembered of a share that is going away.
func (r *reports) forget(key types.NamespacedName) {
	r.last.Forget(key)
}
