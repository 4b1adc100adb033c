package instance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// cloneDirSuffix names the directory a clone is made in, beside the data directory; it becomes
// the data directory only once pg_basebackup has finished.
const cloneDirSuffix = ".clone"

// cloneAppSuffix makes pg_basebackup's application_name: "<pod>-clone".
const cloneAppSuffix = "-clone"

type mismatchError struct{ local, primary, endpoint string }

func (e *mismatchError) Error() string {
	return fmt.Sprintf("the data directory belongs to database system %s, but the primary at %s is %s: refusing to start (nothing is deleted)",
		e.local, e.endpoint, e.primary)
}

// bootstrap initialises the first primary's data directory and starts it.
func (m *Manager) bootstrap(ctx context.Context, d decide.Decision) error {
	pwfile := filepath.Join(m.opts.DataVolume, ".dbfleet-initdb-pwfile")
	if err := os.WriteFile(pwfile, []byte(m.credentials().superuser.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if m.owner != nil {
		if err := os.Chown(pwfile, m.owner.UID, m.owner.GID); err != nil {
			return fmt.Errorf("chown initdb password file: %w", err)
		}
	}
	m.log.Info("Initialising the data directory", "dataDir", m.dataDir, "epoch", d.Epoch)
	if err := m.bins.InitDB(ctx, m.dataDir, m.credentials().superuser.Username, pwfile); err != nil {
		return err
	}
	if err := m.recordPromoted(d.Epoch); err != nil {
		return err
	}
	return m.startPrimary(ctx, d, m.obs.Snapshot().Synchronous)
}

// clone copies the primary into the (empty) data directory.
func (m *Manager) clone(ctx context.Context, d decide.Decision) error {
	up, err := m.reach(d.PrimaryEndpoint)
	if err != nil {
		return err
	}
	tmp := m.dataDir + cloneDirSuffix
	// Only an unfinished clone of ours can be there: it never held a database that ran.
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove unfinished clone %s: %w", tmp, err)
	}
	m.log.Info("Cloning the primary", "primaryEndpoint", d.PrimaryEndpoint)
	r := m.credentials().replication
	// Not the pod name: pg_basebackup's WAL stream would count as the synchronous standby of that
	// name, and confirm commits into a copy that is thrown away if the clone fails.
	if err := m.bins.BaseBackup(ctx, tmp, up, r.Username, r.Password, m.opts.PodName+cloneAppSuffix); err != nil {
		return err
	}
	if err := pgconf.RemoveState(tmp); err != nil {
		return err
	}
	if err := os.Remove(m.dataDir); err != nil {
		return fmt.Errorf("replace the empty data directory with the clone: %w", err)
	}
	if err := os.Rename(tmp, m.dataDir); err != nil {
		return fmt.Errorf("move the clone into place: %w", err)
	}
	m.log.Info("Cloned the primary", "primaryEndpoint", d.PrimaryEndpoint)
	return nil
}

// checkSystemIdentifier refuses a data directory of another database than the primary's. An
// unreachable primary is no refusal: the standby starts and postgres' walreceiver checks too.
func (m *Manager) checkSystemIdentifier(ctx context.Context, endpoint string) error {
	if endpoint == "" {
		return nil
	}
	m.mu.Lock()
	last := m.mismatch
	m.mu.Unlock()
	if last.endpoint == endpoint && time.Since(last.at) < mismatchRecheck {
		return last.err
	}
	up, tlsConfig, err := m.reachTLS(endpoint)
	if err != nil {
		return err
	}
	ctl, err := m.bins.ControlData(ctx, m.dataDir)
	if err != nil {
		return err
	}
	var result error
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	primary, err := pgsql.IdentifySystem(ictx, up.Host, up.Port, m.credentials().replication, tlsConfig)
	switch {
	case err != nil:
		m.log.Info("Cannot ask the primary for its system identifier; starting anyway", "err", err.Error())
	case primary != ctl.SystemIdentifier:
		result = &mismatchError{local: ctl.SystemIdentifier, primary: primary, endpoint: endpoint}
	}
	m.mu.Lock()
	m.mismatch = mismatchCheck{endpoint: endpoint, at: time.Now(), err: result}
	m.mu.Unlock()
	return result
}
