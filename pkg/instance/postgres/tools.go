package postgres

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
)

// InitDB initialises dir with data checksums (so pg_rewind works), SCRAM authentication and the
// superuser whose password is in pwfile.
func (b Binaries) InitDB(ctx context.Context, dir, superuser, pwfile string) error {
	return b.run(ctx, nil, "initdb", "-D", dir, "--data-checksums", "--auth=scram-sha-256",
		"--username="+superuser, "--pwfile="+pwfile, "--encoding=UTF8", "--locale=C")
}

// BaseBackup clones the primary at up into dir (which must be absent or empty), with the WAL
// streamed alongside so the copy is consistent; over TLS, verify-full, with the client
// certificate (both of pg_basebackup's connections read them from the environment).
func (b Binaries) BaseBackup(ctx context.Context, dir string, up pgconf.Upstream, user, password, appName string) error {
	passfile, remove, err := b.passfile(up.HostName(), up.Port, user, password)
	if err != nil {
		return err
	}
	defer remove()
	env := append(os.Environ(), "PGPASSFILE="+passfile, "PGAPPNAME="+appName, "PGCONNECT_TIMEOUT=10", "PGUSER="+user)
	env = append(env, up.Env()...)
	return b.run(ctx, env, "pg_basebackup", "-D", dir, "--no-password", "--wal-method=stream", "--checkpoint=fast")
}

// passfile writes a password file (libpq's pgpass format, mode 0600, owned by whoever runs the
// programs) in b.Scratch holding the one login the program needs, and returns its path and a
// function that removes it. The password goes to a program this way, never in its environment
// (which /proc shows to its user) or arguments (which it shows to everyone).
func (b Binaries) passfile(host, port, user, password string) (string, func(), error) {
	f, err := os.CreateTemp(b.Scratch, ".dbfleet-pgpass-*")
	if err != nil {
		return "", nil, fmt.Errorf("password file: %w", err)
	}
	path := f.Name()
	remove := func() { _ = os.Remove(path) }
	_, err = f.WriteString(pgconf.PassfileLine(host, port, user, password))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && b.User != nil {
		err = os.Chown(path, int(b.User.Uid), int(b.User.Gid))
	}
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("password file: %w", err)
	}
	return path, remove, nil
}

// Rewind makes the stopped data directory dir a copy of the server at up (over TLS) from the point
// where their histories forked (pg_rewind; it needs data checksums or wal_log_hints, which
// initdb and dbfleet.conf give, and on the source a superuser or a role granted its functions,
// as the replication role is). A directory that was not shut down cleanly is first recovered in
// single-user mode (pg_rewind's default). It returns what pg_rewind said ("no rewind required",
// or the divergence point and "Done!").
func (b Binaries) Rewind(ctx context.Context, dir string, up pgconf.Upstream, user, password string) (string, error) {
	passfile, remove, err := b.passfile(up.HostName(), up.Port, user, password)
	if err != nil {
		return "", err
	}
	defer remove()
	host, port := up.Host, up.Port
	source := append(up.Params(), "user="+connValue(user), "dbname=postgres", "connect_timeout=10")
	cmd := b.command("pg_rewind", "--target-pgdata="+dir, "--source-server="+strings.Join(source, " "))
	cmd.Env = append(os.Environ(), "PGPASSFILE="+passfile, "PGAPPNAME=dbfleet-rewind", "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		said := lastLines(out.String())
		if err != nil {
			return said, fmt.Errorf("pg_rewind --target-pgdata=%s from %s:%s: %w: %s", dir, host, port, err, said)
		}
		return said, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return "", fmt.Errorf("pg_rewind: %w", ctx.Err())
	}
}

func connValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// Promote ends recovery of the standby running in dir and waits until it is a primary.
func (b Binaries) Promote(ctx context.Context, dir string) error {
	return b.run(ctx, nil, "pg_ctl", "promote", "-D", dir, "-w", "-t", "60")
}

// Control is what the instance reads from pg_controldata.
type Control struct {
	SystemIdentifier string
	Timeline         string
	State            string
	// CheckpointLocation is "Latest checkpoint location": after a clean shutdown, the shutdown
	// checkpoint, the last record the server wrote.
	CheckpointLocation string
}

// StateShutDown is the "Database cluster state" of a primary that stopped cleanly (a smart or
// fast shutdown, which ends with a shutdown checkpoint).
const StateShutDown = "shut down"

// ControlData reads dir's control file.
func (b Binaries) ControlData(ctx context.Context, dir string) (Control, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := b.command("pg_controldata", "-D", dir)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := output(ctx, cmd)
	if err != nil {
		return Control{}, err
	}
	var c Control
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Database system identifier":
			c.SystemIdentifier = v
		case "Latest checkpoint's TimeLineID":
			c.Timeline = v
		case "Database cluster state":
			c.State = v
		case "Latest checkpoint location":
			c.CheckpointLocation = v
		}
	}
	if c.SystemIdentifier == "" {
		return Control{}, fmt.Errorf("pg_controldata -D %s printed no system identifier", dir)
	}
	return c, nil
}

func (b Binaries) run(ctx context.Context, env []string, name string, args ...string) error {
	cmd := b.command(name, args...)
	cmd.Env = env
	_, err := output(ctx, cmd)
	return err
}

// output runs cmd, killing it when ctx ends, and returns stdout; stderr is in the error.
func output(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", cmd.Path, strings.Join(cmd.Args[1:], " "), err, lastLines(stderr.String(), stdout.String()))
		}
		return stdout.Bytes(), nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return nil, fmt.Errorf("%s: %w", cmd.Path, ctx.Err())
	}
}

func lastLines(outs ...string) string {
	var lines []string
	for _, o := range outs {
		for _, l := range strings.Split(strings.TrimSpace(o), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "; ")
}
