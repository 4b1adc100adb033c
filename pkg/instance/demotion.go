package instance

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/postgres"
)

// recordDemotion reads, from the control file of a data directory that has just stopped being
// primary at epoch, where its WAL ends: the demotion token of a planned switchover, which the
// agent reports and the hub hands to the new primary as the LSN to replay past before it
// promotes. A fast shutdown ends with a shutdown checkpoint, the last record the primary writes,
// which its walsenders send to the standbys before they exit; its location is
// pg_controldata's "Latest checkpoint location". A postgres that did not stop cleanly (an
// immediate shutdown at the fence deadline) has no such point: the record says so instead.
func (m *Manager) recordDemotion(ctx context.Context, epoch int64) {
	d := &contract.Demotion{Epoch: epoch}
	ctl, err := m.bins.ControlData(ctx, m.dataDir)
	switch {
	case err != nil:
		d.Message = fmt.Sprintf("the final LSN cannot be read: %v", err)
	case ctl.State != postgres.StateShutDown || ctl.CheckpointLocation == "":
		d.Message = fmt.Sprintf("postgres did not stop cleanly (database cluster state %q): it wrote no shutdown checkpoint, so the end of its WAL is not known", ctl.State)
	default:
		d.FinalLSN = ctl.CheckpointLocation
		d.Timeline, _ = strconv.ParseInt(ctl.Timeline, 10, 64)
	}
	m.log.Info("Stopped as primary", "epoch", epoch, "finalLSN", d.FinalLSN, "timeline", d.Timeline, "message", d.Message)
	m.mu.Lock()
	m.demoted = d
	m.mu.Unlock()
}
