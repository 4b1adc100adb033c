package instance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/contact"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/observe"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/postgres"
	"github.com/dbfleet/dbfleet/pkg/instance/reaper"
)

const (
	// loopInterval bounds how long a decision waits for a change that no event announces (the
	// clock reaching a Lease deadline, postgres exiting).
	loopInterval = 100 * time.Millisecond
	// restartBackoff spaces attempts to start postgres (a crashed postmaster's backends may hold
	// its shared memory for a moment).
	restartBackoff = time.Second
	// reapInterval: how often, as PID 1, the manager reaps orphaned zombies (package reaper).
	reapInterval = 5 * time.Second
	// retryBackoff spaces retries of a failed action (a clone while the primary starts up).
	retryBackoff = 2 * time.Second
	// shutdownTimeout is how long a fast shutdown on SIGTERM may take before it turns immediate.
	shutdownTimeout = 20 * time.Second
	// mismatchRecheck spaces system identifier checks of the same primary endpoint.
	mismatchRecheck = 10 * time.Second
)

// Manager is one instance manager.
type Manager struct {
	opts    Options
	dataDir string
	bins    postgres.Binaries
	owner   *pgconf.Owner
	proc    *postgres.Process
	obs     *observe.Observer
	guard   *guard
	log     logr.Logger

	// mu guards the fields below, and makes "not fenced, so start" one step against the guard.
	mu     sync.Mutex
	state  pgconf.State
	acted  int64
	mode   contract.Role // what postgres was started as (or promoted to)
	fenced bool          // stopped by a fence, not started since
	// rolesReady: the primary has the Secrets' roles (set after EnsureRoles or a promotion).
	rolesReady  bool
	decision    decide.Decision
	errReason   contract.Reason
	errMsg      string
	lastStart   time.Time
	failed      decide.Action // the action that failed last, retried after retryAt
	retryAt     time.Time
	restarts    int // postgres started again after it exited on its own (a crash)
	slotsSync   time.Time
	slotsSynced []string        // the slots as last synced
	slotsErr    string          // the last error of a standby's slot sync, logged once (step)
	server      contract.Status // the last reading of the server, see server.go
	serverAs    contract.Role   // what postgres ran as when server was read
	mismatch    mismatchCheck
	// creds are the Secrets' credentials in use (credentials.go); credsErr why the mounted
	// Secrets could not be read or applied last time, nil when they were.
	creds    credentials
	credsErr error
	// volume is the data volume's space as last read (volume.go).
	volume volumeSpace
	// upstream is a non-streaming standby's own try of its primary endpoint (upstream.go).
	upstream upstreamCheck
	// rejoined is how a former primary last came back as a standby (actions.go, rejoin).
	rejoined *contract.Rejoin
	// demoted is where the WAL ended when postgres last stopped as primary (demotion.go).
	demoted *contract.Demotion
	// hearing and silence are the failsafe's counters (failsafe.go).
	hearing contact.Hearing
	silence *contact.Silence
	// admin is the manager's own connection to postgres (withConn), and its lock.
	admin struct {
		sync.Mutex
		conn *pgx.Conn
	}
	// archive is continuous archiving (archive.go); nil without a backup repository. self is
	// this program, which postgres runs as archive_command.
	archive *archiving
	self    string
	// lastReading is when the last reading of the running primary ended (for fence messages).
	lastReading time.Time
}

type mismatchCheck struct {
	endpoint string
	at       time.Time
	err      error
}

// New checks the options and builds a Manager.
func New(opts Options) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	binDir, err := postgres.FindBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	cred, owner, err := opts.runAs()
	if err != nil {
		return nil, err
	}
	creds, err := opts.readCredentials()
	if err != nil {
		return nil, err
	}
	archive, err := newArchiving(opts, cred)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("this program's path (archive_command runs it): %w", err)
	}
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	m := newManager(opts, binDir, cred, owner, creds, cs)
	m.archive, m.self = archive, self
	return m, nil
}

func newManager(opts Options, binDir string, cred *syscall.Credential, owner *pgconf.Owner, creds credentials, cs kubernetes.Interface) *Manager {
	m := &Manager{
		opts:    opts,
		dataDir: opts.DataDir(),
		bins:    postgres.Binaries{Dir: binDir, User: cred, Scratch: opts.DataVolume},
		owner:   owner,
		creds:   creds,
		obs: &observe.Observer{Client: cs, Namespace: opts.Namespace, Pod: opts.PodName,
			Lease: contract.PrimaryLeaseName(opts.Database), Interval: opts.PollInterval},
		mode:    contract.RoleStopped,
		silence: contact.NewSilence(time.Now()),
	}
	m.proc = &postgres.Process{Bins: m.bins, DataDir: m.dataDir, Output: os.Stderr}
	m.guard = &guard{fire: m.fenceAtDeadline}
	return m
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (pass --kubeconfig outside a pod): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// Run manages postgres until ctx ends, then shuts it down (fast, with a clean checkpoint).
func (m *Manager) Run(ctx context.Context) error {
	m.log = ctrl.LoggerFrom(ctx).WithValues("pod", m.opts.PodName)
	ctx = ctrl.LoggerInto(ctx, m.log)
	m.log.Info("Starting", "uid", os.Geteuid(), "gid", os.Getegid(), "dataDir", m.dataDir)
	if err := m.prepareVolume(); err != nil {
		return err
	}
	if m.archive != nil {
		if err := m.archive.prepare(m.owner); err != nil {
			return err
		}
		env, err := m.archive.postgresEnv()
		if err != nil {
			return err
		}
		m.proc.Env = env
		m.log.Info("Archiving WAL while primary", "repository", m.archive.tool.Repo.Where(), "archiveTimeout", m.opts.ArchiveTimeout.String())
	}
	if _, err := pgconf.WriteTLS(m.dataDir, m.credentials().tls, m.owner); err != nil {
		return fmt.Errorf("write the TLS files: %w", err)
	}
	st, err := pgconf.ReadState(m.dataDir, m.opts.PodName)
	if err != nil {
		return err
	}
	m.state = st
	m.acted = max(st.PromotedEpoch, st.FencedEpoch)
	if st.PromotedEpoch > 0 && st.FencedEpoch >= st.PromotedEpoch && st.PromotedEpoch > st.RejoinedEpoch {
		// Stopped as primary and not rejoined since: its final LSN is still in the control file
		// (a manager restarted during a switchover must not leave the hub waiting for it).
		m.recordDemotion(ctx, st.PromotedEpoch)
	}

	srv, err := m.serve(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()

	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	wg.Add(2)
	go func() { defer wg.Done(); m.obs.Run(runCtx) }()
	go func() { defer wg.Done(); m.watchServer(runCtx) }()
	if os.Getpid() == 1 {
		// PID 1 of its container: the orphans of a postmaster that died at once are ours.
		wg.Add(1)
		go func() { defer wg.Done(); reaper.Run(runCtx, reapInterval, m.log) }()
	}
	defer func() { cancel(); wg.Wait() }()

	changed := m.obs.Changed()
	tick := time.NewTicker(loopInterval)
	defer tick.Stop()
	for {
		m.step(ctx)
		select {
		case <-ctx.Done():
			m.shutdown()
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// prepareVolume creates the data directory (mode 0700, owned by the postgres user).
func (m *Manager) prepareVolume() error {
	if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", m.dataDir, err)
	}
	for _, dir := range []string{m.opts.DataVolume, m.dataDir} {
		if m.owner != nil {
			if err := os.Chown(dir, m.owner.UID, m.owner.GID); err != nil {
				return fmt.Errorf("chown %s: %w", dir, err)
			}
		}
	}
	if err := os.Chmod(m.dataDir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", m.dataDir, err)
	}
	return nil
}

// running is what postgres runs as now.
func (m *Manager) running() contract.Role {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *Manager) runningLocked() contract.Role {
	if !m.proc.Running() {
		return contract.RoleStopped
	}
	return m.mode
}

// step observes, decides and acts once.
func (m *Manager) step(ctx context.Context) {
	snap := m.obs.Snapshot()
	m.refreshCredentials(ctx)
	hasData, err := pgconf.HasData(m.dataDir)
	if err != nil {
		m.setError(contract.ReasonStartFailed, err)
		return
	}
	m.mu.Lock()
	in := decide.Input{Now: time.Now(), Cluster: m.opts.Cluster, Pod: snap.Pod, Lease: snap.Lease,
		Local: decide.Local{HasData: hasData, PromotedEpoch: m.state.PromotedEpoch, FencedEpoch: m.state.FencedEpoch,
			ActedEpoch: m.acted, Running: m.runningLocked()}}
	in.Local.PrimarySilence = m.silenceLocked(in.Now)
	if m.opts.Failsafe {
		in.Failsafe = m.failsafeInputLocked(snap.Standbys, in.Now)
	}
	if in.Local.Running == contract.RoleStandby && m.serverAs == contract.RoleStandby {
		in.Local.ReplayedLSN = m.server.ReplayedLSN
	}
	m.mu.Unlock()
	d := decide.Decide(in)

	m.mu.Lock()
	if d.Epoch > m.acted {
		m.acted = d.Epoch
	}
	if m.decision.Action != d.Action || m.decision.Reason != d.Reason || m.decision.Epoch != d.Epoch {
		m.log.Info("Decided", "action", d.Action, "epoch", d.Epoch, "reason", d.Reason, "message", d.Message,
			"podRole", snap.Pod.Role, "podEpoch", snap.Pod.Epoch, "running", in.Local.Running)
	}
	m.decision = d
	m.mu.Unlock()

	m.mu.Lock()
	wait := d.Action != decide.ActionFence && d.Action != decide.ActionNone && d.Action == m.failed && time.Now().Before(m.retryAt)
	m.mu.Unlock()
	if wait {
		return
	}
	var reason contract.Reason
	switch d.Action {
	case decide.ActionNone:
		err = nil
		m.keepSlotsWhileWaitingToPromote(ctx, snap)
	case decide.ActionFence:
		m.fence(d.FencedEpoch, d.Reason, d.Message)
	case decide.ActionBootstrap:
		reason, err = contract.ReasonBootstrapFailed, m.bootstrap(ctx, d)
	case decide.ActionClone:
		reason, err = contract.ReasonCloneFailed, m.clone(ctx, d)
	case decide.ActionRunStandby:
		reason, err = contract.ReasonStartFailed, m.runStandby(ctx, d)
		if err == nil && d.Reason == contract.ReasonWaitingForSilence {
			m.keepSlotsWhileWaitingToPromote(ctx, snap)
		}
	case decide.ActionPromote:
		reason, err = contract.ReasonPromoteFailed, m.promote(ctx, d)
	case decide.ActionRunPrimary:
		reason, err = contract.ReasonStartFailed, m.runPrimary(ctx, d, snap)
	}
	m.mu.Lock()
	if err != nil && !errors.Is(err, errBackoff) {
		m.failed, m.retryAt = d.Action, time.Now().Add(retryBackoff)
	} else {
		m.failed = ""
	}
	m.mu.Unlock()
	var mismatch *mismatchError
	var rejoin *rejoinError
	switch {
	case errors.As(err, &mismatch):
		m.setError(contract.ReasonSystemIdentifierMismatch, err)
	case errors.As(err, &rejoin):
		m.setError(contract.ReasonRejoinFailed, err)
	case errors.Is(err, errBackoff):
	case err != nil:
		m.setError(reason, err)
	default:
		m.setError("", nil)
	}
	if m.running() == contract.RolePrimary {
		// Afresh: the action may have taken seconds, and the Lease been renewed meanwhile. An
		// invalid Lease leaves the guard at its deadline (and the next step fences).
		if j := m.judgeWrites(d.Epoch); j.Valid {
			m.guard.arm(d.Epoch, j)
		}
	} else {
		m.guard.disarm()
	}
}

// keepSlotsWhileWaitingToPromote: the promoted pod, waiting to promote (its Lease, the old
// primary's final LSN, its silence), keeps the slots its standbys will stream by. A failure only
// costs them time; the primary makes them again.
func (m *Manager) keepSlotsWhileWaitingToPromote(ctx context.Context, snap observe.Snapshot) {
	if snap.Pod.Role != contract.PodRolePrimary || m.running() != contract.RoleStandby {
		return
	}
	if err := m.syncSlots(ctx, snap.Standbys); err != nil && err.Error() != m.slotsErr {
		m.log.Info("Replication slots for the standbys to come not made yet", "err", err.Error())
		m.slotsErr = err.Error()
	}
}

func (m *Manager) setError(reason contract.Reason, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.errReason, m.errMsg = "", ""
		return
	}
	if m.errMsg != err.Error() {
		m.log.Error(err, "Instance action failed", "reason", reason)
	}
	m.errReason, m.errMsg = reason, err.Error()
}

// shutdown stops postgres on SIGTERM: fast, immediate at the fence deadline or after
// shutdownTimeout, whichever comes first.
func (m *Manager) shutdown() {
	immediateAt := time.Now().Add(shutdownTimeout)
	if m.running() == contract.RolePrimary {
		if d := m.guard.deadline(); !d.IsZero() && d.Before(immediateAt) {
			immediateAt = d
		}
	}
	m.log.Info("Shutting postgres down", "immediateAt", immediateAt)
	m.guard.disarm()
	m.proc.Stop(immediateAt)
}

// Forward passes sig on to postgres (SIGHUP: reload its configuration).
func (m *Manager) Forward(sig os.Signal) { m.proc.Signal(sig) }

// connectHost is the address the manager reaches its own postgres at.
func (m *Manager) connectHost() string {
	for _, a := range strings.Split(m.opts.ListenAddresses, ",") {
		a = strings.TrimSpace(a)
		if a == "*" || a == "0.0.0.0" || a == "localhost" || a == "" {
			return "127.0.0.1"
		}
		if a == "::" {
			return "::1"
		}
		if ip := net.ParseIP(a); ip != nil && ip.IsLoopback() {
			return a
		}
	}
	return strings.TrimSpace(strings.Split(m.opts.ListenAddresses, ",")[0])
}
