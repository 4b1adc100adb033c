package instance

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// statusInterval is how often the manager reads its server's state for /status and /readyz.
const statusInterval = 500 * time.Millisecond

// Budgets of the reading's connection and of one reading on it. Generous, because giving up
// costs more than waiting: a connection abandoned in its authentication (a SCRAM exchange, a
// backend forked for it) goes on burning CPU in postgres after the client left, and on a starved
// machine the manager's retries every statusInterval (2 s budgets then) piled up dozens of such
// backends per instance, which starved the machine further. A reading that takes long still
// counts: the failsafe's hearing is dated by its probe, taken before it.
const (
	connectBudget = 10 * time.Second
	readingBudget = 5 * time.Second
)

// serve starts the HTTPS server: /healthz (the manager runs) and /readyz (Status.Ready) for
// anyone, /status for the agent's client certificate alone (statusCaller). The status says
// where the primary's Lease stands, which standbys it hears and why it fences: what an attacker
// on the network would time an attack by.
func (m *Manager) serve(ctx context.Context) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc(contract.HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc(contract.ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		st := m.Status()
		if !st.Ready {
			why := fmt.Sprintf("not ready: %s %s", st.Role, st.Reason)
			if ok, _ := statusCaller(r); ok {
				why += " " + st.Message // the message may name addresses and errors: /status's readers only
			}
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc(contract.Path, func(w http.ResponseWriter, r *http.Request) {
		if ok, why := statusCaller(r); !ok {
			http.Error(w, "/status answers only the dbfleet agent's client certificate: "+why, http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		st := m.Status()
		st.Time = time.Now().UTC().Format(time.RFC3339Nano) // as late as can be: the agent times the answer
		_ = json.NewEncoder(w).Encode(st)
	})
	tlsConfig := &serverTLS{material: func() pgconf.TLS { return m.credentials().tls }}
	if _, err := tlsConfig.config(nil); err != nil {
		return nil, fmt.Errorf("serve HTTPS: %w", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(m.opts.HTTPPort)))
	if err != nil {
		return nil, fmt.Errorf("listen for HTTPS on port %d: %w", m.opts.HTTPPort, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: tlsConfig.config},
		ErrorLog:  log.New(serverErrors{m.log}, "", 0)}
	go func() {
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error(err, "HTTP server stopped")
		}
	}()
	return srv, nil
}

// Status is what /status reports now.
func (m *Manager) Status() contract.Status {
	snap := m.obs.Snapshot()
	lease := snap.Lease
	diverged := m.divergedDirs()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.server
	running := m.runningLocked()
	if m.serverAs != running {
		// The reading is of the server as it ran before (a standby just promoted, say):
		// nothing of it is true of the server now until the next reading.
		st = contract.Status{SystemIdentifier: m.server.SystemIdentifier}
	}
	st.Pod = m.opts.PodName
	st.Epoch = m.acted
	st.PromotedEpoch = m.state.PromotedEpoch
	st.Restarts = m.restarts
	st.Role = running
	d := m.decision
	if running == contract.RoleStopped {
		st.Ready, st.Streaming, st.LagBytes = false, false, 0
		st.ReceivedLSN, st.ReplayedLSN, st.Timeline = "", "", 0
		if m.fenced || (m.state.FencedEpoch > 0 && m.state.FencedEpoch >= m.acted) {
			st.Role = contract.RoleFenced
		}
	}
	if running == contract.RolePrimary && !m.rolesReady {
		st.Ready = false
	}
	if running == contract.RolePrimary && d.Lease.Valid {
		st.LeaseDeadline = d.Lease.WritableUntil.UTC().Format(time.RFC3339Nano)
	}
	if lease.Exists && !lease.RenewTime.IsZero() {
		st.LeaseRenewTime = lease.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	st.Reason, st.Message = d.Reason, d.Message
	st.Rejoin, st.Diverged, st.Demoted = m.rejoined, diverged, m.demoted
	now := time.Now()
	if running == contract.RolePrimary {
		st.Synchronous = m.synchronousStatus(snap.Synchronous, st)
		if m.opts.Failsafe { // without it there is no failsafe to report, and the agent fences as before
			j := m.failsafeInputLocked(snap.Standbys, now)
			st.Failsafe = &contract.Failsafe{Active: d.Lease.Failsafe, Members: j.Members, Unheard: j.Unheard}
			if st.Failsafe.Members == nil {
				st.Failsafe.Members = []string{}
			}
		}
	} else {
		st.Synchronous, st.Replication = nil, nil
		silent := int64(m.silenceLocked(now) / time.Second)
		st.PrimarySilenceSeconds = &silent
	}
	switch {
	case m.volume.full():
		// First: it explains the failures that follow from it (postgres stopping, a start failing).
		// Not ready: a primary takes no real write (a table cannot grow), a standby cannot keep
		// the WAL coming. Reads still work, through the pod IP.
		st.Ready = false
		st.Reason, st.Message = contract.ReasonVolumeFull, m.volume.message(m.opts.DataVolume)
		if m.errMsg != "" {
			st.Message += "; last error: " + m.errMsg
		}
	case m.errReason != "":
		st.Reason, st.Message = m.errReason, m.errMsg
	case m.credsErr != nil:
		st.Reason, st.Message = contract.ReasonCredentialsInvalid, m.credsErr.Error()
	case d.Reason == contract.ReasonWaitingForSilence:
		// It follows nobody on purpose: nothing to say of its upstream.
	case running == contract.RoleStandby && !st.Streaming && m.upstream.err != nil && d.Reason == contract.ReasonWaitingForReplay:
		// The wait explains why it is not primary yet; the unreachable upstream, why it may last.
		st.Message += "; not streaming: " + m.upstream.err.Error()
	case running == contract.RoleStandby && !st.Streaming && m.upstream.err != nil:
		st.Reason, st.Message = contract.ReasonPrimaryUnreachable, "not streaming: "+m.upstream.err.Error()
	case st.Synchronous != nil && st.Synchronous.Waiting:
		// Not ready: a client's commit does not return (the readiness write does not wait).
		st.Ready = false
		st.Reason, st.Message = contract.ReasonWaitingForSynchronousStandbys, decide.SynchronousMessage(st.Synchronous)
	case st.Synchronous != nil && st.Synchronous.Degraded:
		st.Reason, st.Message = contract.ReasonSynchronousDegraded, decide.SynchronousMessage(st.Synchronous)
	}
	return st
}

// synchronousStatus is a running primary's synchronous replication: what the pod asks, judged
// against the standbys that stream, with the setting postgres really has in effect (st, as last
// read). Nil when the pod asks for none and none is in effect.
func (m *Manager) synchronousStatus(want decide.Synchronous, st contract.Status) *contract.Synchronous {
	inEffect := ""
	if st.Synchronous != nil {
		inEffect = st.Synchronous.StandbyNames
	}
	_, plan := decide.PlanSynchronous(want, m.opts.PodName, st.Replication)
	if plan == nil {
		if inEffect == "" {
			return nil
		}
		plan = &contract.Synchronous{}
	}
	plan.StandbyNames = inEffect
	return plan
}

// watchServer reads the server's state every statusInterval until ctx ends.
func (m *Manager) watchServer(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	var rl readingLog
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		space := readVolumeSpace(m.opts.DataVolume)
		m.mu.Lock()
		m.volume = space
		m.mu.Unlock()
		running := m.running()
		if running == contract.RoleStopped {
			if conn != nil {
				_ = conn.Close(context.Background())
				conn = nil
			}
			m.noteStopped(time.Now())
			m.setServer(contract.Status{}, running)
			continue
		}
		if conn == nil || conn.IsClosed() {
			cctx, cancel := context.WithTimeout(ctx, connectBudget)
			cfg, err := pgsql.ConnConfig(m.connectHost(), m.opts.PostgresPort, m.credentials().superuser.Username, m.credentials().superuser.Password, "postgres", nil)
			if err == nil {
				cfg.ConnectTimeout = connectBudget
				conn, err = pgsql.Connect(cctx, cfg)
			}
			cancel()
			if err != nil {
				conn = nil
				m.noteUnknown(running, time.Now())
				m.setServer(contract.Status{}, running)
				rl.failed(m.log, err)
				continue
			}
		}
		qctx, cancel := context.WithTimeout(ctx, readingBudget)
		began := time.Now()
		st, err := m.readServer(qctx, conn, running)
		cancel()
		if err != nil {
			_ = conn.Close(context.Background())
			conn = nil
			rl.failed(m.log, err)
		} else {
			rl.succeeded(m.log, time.Since(began))
		}
		m.setServer(st, running)
		m.checkUpstream(ctx, running, err == nil && st.Streaming)
	}
}

// slowReading is how long a reading may take before the log says so: the failsafe's hearing of
// the standbys is only as fresh as the readings, so an on-call engineer asking why a primary
// fenced on a busy machine needs to see them slow down.
const slowReading = 2 * time.Second

// readingLog logs the reading loop's troubles without flooding the log: a failure when its
// message changes, the first success after failures, and slow readings at most once per
// slowReportEvery.
type readingLog struct {
	lastErr  string
	lastSlow time.Time
}

const slowReportEvery = 10 * time.Second

func (r *readingLog) failed(log logr.Logger, err error) {
	if err.Error() != r.lastErr {
		log.Info("Reading the server failed; it counts as no reading", "err", err.Error())
		r.lastErr = err.Error()
	}
}

func (r *readingLog) succeeded(log logr.Logger, took time.Duration) {
	if r.lastErr != "" {
		log.Info("Reading the server again", "took", took.Round(time.Millisecond).String())
		r.lastErr = ""
	}
	if took > slowReading && time.Since(r.lastSlow) > slowReportEvery {
		log.Info("Reading the server is slow", "took", took.Round(time.Millisecond).String(), "budget", readingBudget.String())
		r.lastSlow = time.Now()
	}
}

func (m *Manager) readServer(ctx context.Context, conn *pgx.Conn, running contract.Role) (contract.Status, error) {
	// The clock first, then the position (the reading's first statement): WAL past it was
	// inserted after this time.
	at := time.Now()
	srv, err := pgsql.ReadServer(ctx, conn)
	if err != nil {
		m.noteUnknown(running, time.Now())
		return contract.Status{}, err
	}
	var p probe
	if running == contract.RolePrimary && !srv.InRecovery {
		lsn, err := contract.ParseLSN(srv.InsertLSN)
		p = probe{at: at, lsn: lsn, ok: err == nil}
	}
	m.noteContact(running, srv, p, time.Now())
	st := contract.Status{Timeline: srv.Timeline, ReceivedLSN: srv.ReceivedLSN, ReplayedLSN: srv.ReplayedLSN,
		LagBytes: srv.LagBytes, Streaming: srv.Streaming, SystemIdentifier: srv.SystemIdentifier}
	switch {
	case running == contract.RolePrimary && !srv.InRecovery:
		st.Ready = pgsql.Write(ctx, conn) == nil
		st.Synchronous = &contract.Synchronous{StandbyNames: srv.SynchronousStandbyNames}
		st.Archive = m.archiveStatus(srv.Archiver)
		for _, r := range srv.Replication {
			st.Replication = append(st.Replication, contract.Replica{Pod: r.ApplicationName, State: r.State, SyncState: r.SyncState, FlushLSN: r.FlushLSN})
		}
	case running == contract.RoleStandby && srv.InRecovery:
		st.Ready = srv.Streaming
	}
	return st, nil
}

func (m *Manager) setServer(st contract.Status, as contract.Role) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.server, m.serverAs = st, as
}
