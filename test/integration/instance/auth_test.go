package instance

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// connectFrom logs in to p as s from the local address from (127.0.0.1 is loopback to
// pg_hba.conf; 127.0.0.2 is another host).
func (p *proc) connectFrom(ctx context.Context, from string, s secret) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres connect_timeout=5", p.pgPort, s.username))
	if err != nil {
		return nil, err
	}
	cfg.Password = s.password
	if cfg.TLSConfig, err = p.clientTLS(s); err != nil {
		return nil, err
	}
	cfg.Fallbacks = nil
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	cfg.DialFunc = dialer.DialContext
	return pgx.ConnectConfig(ctx, cfg)
}

// TestSuperuserLogsInOnlyOverLoopback: by default the superuser is refused from any host but the
// pod's own, the replication role may still checkpoint the primary (what a former primary does
// from another host before pg_rewind; the rewind itself is TestFormerPrimaryRewindsAndFollowsTheNewPrimary),
// and --superuser-from-network opens it again.
func TestSuperuserLogsInOnlyOverLoopback(t *testing.T) {
	ctx := context.Background()
	ns := "auth"
	createNamespace(ctx, t, ns)
	p := newProc(ctx, t, "auth-0", ns, "east")
	createPod(ctx, t, ns, p.pod, contract.PodRolePrimary, 1, p.endpoint(), "")
	renew(t, ns, decide.Holder("east", 1))
	p.start(t)
	p.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })

	if conn, err := p.connectFrom(ctx, "127.0.0.2", superuser); err == nil {
		conn.Close(ctx)
		t.Error("the superuser logged in from another host")
	} else if !strings.Contains(err.Error(), "pg_hba.conf rejects connection") {
		t.Errorf("superuser from another host: %v, want refused by pg_hba.conf", err)
	}
	conn, err := p.connectFrom(ctx, "127.0.0.1", superuser)
	if err != nil {
		t.Fatalf("superuser over loopback: %v", err)
	}
	conn.Close(ctx)

	repl, err := p.connectFrom(ctx, "127.0.0.2", replication)
	if err != nil {
		t.Fatalf("replication role from another host: %v", err)
	}
	defer repl.Close(ctx)
	if _, err := repl.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Errorf("CHECKPOINT as the replication role: %v", err)
	}
	var isSuper bool
	if err := repl.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&isSuper); err != nil || isSuper {
		t.Errorf("the replication role is a superuser (%v, %v)", isSuper, err)
	}

	p.stop(t)
	p.args = append(p.args, "--superuser-from-network=true")
	p.start(t)
	p.waitStatus(ctx, t, "primary again", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	conn, err = p.connectFrom(ctx, "127.0.0.2", superuser)
	if err != nil {
		t.Fatalf("superuser from another host with --superuser-from-network: %v", err)
	}
	conn.Close(ctx)
}
