package instance

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// A primary whose volume fills up: writes fail, the status says VolumeFull with what to do, and
// once the volume grows, postgres takes writes again with every acknowledged row in place.
// The volume is a tmpfs of 64 MiB (mounting needs root).
func TestFullVolumeSaysSoAndRecoversWhenItGrows(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs as the data volume needs root")
	}
	ctx := context.Background()
	dir := volume(t)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	// Registered before the instance: cleanups run last-first, so postgres stops before this.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})

	createNamespace(ctx, t, "full")
	p := newProc(ctx, t, "full-0", "full", "full")
	p.volume = dir
	createPod(ctx, t, "full", p.pod, contract.PodRolePrimary, 1, p.endpoint(), "")
	renew(t, "full", decide.Holder("full", 1))
	p.start(t)
	p.waitStatus(ctx, t, "primary and ready", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })

	conn, err := p.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE fill (n int, pad text)"); err != nil {
		t.Fatal(err)
	}
	// Each statement commits 200 rows of 1 KiB; count only what postgres acknowledged.
	acked := 0
	var writeErr error
	for i := 0; i < 10000; i++ {
		_, writeErr = conn.Exec(ctx, "INSERT INTO fill SELECT g, repeat('x', 1024) FROM generate_series($1::int, $1::int + 199) g", acked+1)
		if writeErr != nil {
			break
		}
		acked += 200
	}
	_ = conn.Close(ctx)
	if writeErr == nil {
		t.Fatal("64 MiB took every write")
	}
	t.Logf("%d rows acknowledged, then: %v", acked, writeErr)
	st := p.waitStatus(ctx, t, "VolumeFull", func(s contract.Status) bool { return s.Reason == contract.ReasonVolumeFull })
	for _, want := range []string{dir, "free of 64Mi", "grow spec.storage.size", "nothing is deleted"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("status message %q does not say %q", st.Message, want)
		}
	}
	if st.Ready {
		t.Errorf("a primary on a full volume reports ready: %+v", st)
	}

	// The volume grows (as a PVC expansion would): postgres writes again, nothing was lost.
	if out, err := exec.Command("mount", "-o", "remount,size=512m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow tmpfs: %v: %s", err, out)
	}
	p.waitStatus(ctx, t, "primary and ready again", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Reason != contract.ReasonVolumeFull
	})
	conn, err = p.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM fill WHERE n <= $1", acked).Scan(&n); err != nil || n != acked {
		t.Fatalf("%d of the %d acknowledged rows are there (%v)", n, acked, err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO fill VALUES (-1, 'after')"); err != nil {
		t.Fatalf("no write after the volume grew: %v", err)
	}
}
