package instance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/test/framework"
)

// multiWriter is a client that writes numbered rows (INSERT INTO rows VALUES (n), n unique
// across the fleet) to every instance directly, each as fast as it answers, and notes, on the
// test's one clock, when each write was sent and when it was acknowledged. An instance that is
// not a writable primary refuses or does not answer; those attempts are not acknowledgements.
type multiWriter struct {
	next   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	acks []acked
}

// acked is one acknowledged write: row n, accepted by pod between sent and at.
type acked struct {
	pod      string
	n        int64
	sent, at time.Time
}

// writeTimeout bounds one attempt: a commit waiting for a synchronous standby, or a server that
// vanished, is given up on (its outcome unknown, so it is no acknowledgement) and the writer
// reconnects.
const writeTimeout = 2 * time.Second

func startMultiWriter(t *testing.T, procs ...*proc) *multiWriter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &multiWriter{cancel: cancel}
	w.next.Store(10_000_000)
	for _, p := range procs {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.write(ctx, p)
		}()
	}
	t.Cleanup(w.stop)
	return w
}

func (w *multiWriter) write(ctx context.Context, p *proc) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	for ctx.Err() == nil {
		if conn == nil {
			cctx, cancel := context.WithTimeout(ctx, writeTimeout)
			c, err := p.connect(cctx, app, app.password)
			cancel()
			if err != nil {
				pause()
				continue
			}
			conn = c
		}
		n := w.next.Add(1)
		sent := time.Now()
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		_, err := conn.Exec(wctx, "INSERT INTO rows VALUES ($1)", n)
		cancel()
		if err != nil {
			_ = conn.Close(context.Background())
			conn = nil
			pause()
			continue
		}
		at := time.Now()
		w.mu.Lock()
		w.acks = append(w.acks, acked{pod: p.pod, n: n, sent: sent, at: at})
		w.mu.Unlock()
	}
}

func (w *multiWriter) stop() { w.cancel(); w.wg.Wait() }

// count is how many writes pod acknowledged so far.
func (w *multiWriter) count(pod string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.acks {
		if a.pod == pod {
			n++
		}
	}
	return n
}

// waitAcks waits until pod has acknowledged n more writes than it had when called.
func (w *multiWriter) waitAcks(ctx context.Context, t *testing.T, pod string, n int) {
	t.Helper()
	want := w.count(pod) + n
	if err := framework.WaitFor(ctx, waitTimeout, fmt.Sprintf("%d writes acknowledged by %s", want, pod), func(context.Context) (bool, error) {
		return w.count(pod) >= want, nil
	}); err != nil {
		t.Fatalf("%v (has %d)", err, w.count(pod))
	}
}

// window is when one instance accepted writes: from the sending of its first acknowledged write
// to the acknowledgement of its last (wider than the commits themselves, so disjoint windows
// mean disjoint commits).
type window struct {
	pod        string
	from, to   time.Time
	n          int
	rowsPerSec float64
}

func (w *multiWriter) windows() []window {
	w.mu.Lock()
	defer w.mu.Unlock()
	by := map[string]*window{}
	for _, a := range w.acks {
		win := by[a.pod]
		if win == nil {
			win = &window{pod: a.pod, from: a.sent, to: a.at}
			by[a.pod] = win
		}
		if a.sent.Before(win.from) {
			win.from = a.sent
		}
		if a.at.After(win.to) {
			win.to = a.at
		}
		win.n++
	}
	var out []window
	for _, win := range by {
		if d := win.to.Sub(win.from).Seconds(); d > 0 {
			win.rowsPerSec = float64(win.n) / d
		}
		out = append(out, *win)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from.Before(out[j].from) })
	return out
}

// checkNoOverlap fails the test when two instances accepted writes in overlapping windows: two
// primaries.
func (w *multiWriter) checkNoOverlap(t *testing.T, start time.Time) []window {
	t.Helper()
	wins := w.windows()
	var lines []string
	for _, win := range wins {
		lines = append(lines, fmt.Sprintf("%s: %d writes acknowledged from %s to %s (%.0f/s)", win.pod, win.n,
			win.from.Sub(start).Round(time.Millisecond), win.to.Sub(start).Round(time.Millisecond), win.rowsPerSec))
	}
	t.Logf("write windows (from the test's start):\n%s", strings.Join(lines, "\n"))
	for i := 1; i < len(wins); i++ {
		if prev := wins[i-1]; !prev.to.Before(wins[i].from) {
			t.Errorf("%s and %s accepted writes in overlapping windows: %s until %s, %s from %s",
				prev.pod, wins[i].pod, prev.pod, prev.to.Format(time.RFC3339Nano), wins[i].pod, wins[i].from.Format(time.RFC3339Nano))
		}
	}
	return wins
}

// missingOn are the acknowledged rows that p does not have.
func (w *multiWriter) missingOn(ctx context.Context, t *testing.T, p *proc) []int64 {
	t.Helper()
	conn, err := p.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT n FROM rows WHERE n > 10000000")
	if err != nil {
		t.Fatal(err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	present := make(map[int64]bool, len(have))
	for _, n := range have {
		present[n] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var missing []int64
	for _, a := range w.acks {
		if !present[a.n] {
			missing = append(missing, a.n)
		}
	}
	return missing
}

// total is how many writes were acknowledged in all.
func (w *multiWriter) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}
