package member

import (
	"context"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestPrimaryWatchCountsALostPrimary walks the watch through the cases it must tell apart: a
// primary that stops serving for the allowance is lost, once; one that never served, one that
// serves again in time, and a pod created anew are not; a crash loop is, serving between or not.
func TestPrimaryWatchCountsALostPrimary(t *testing.T) {
	const after = 10 * time.Second
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	up := primaryReading{pod: "db-0", uid: "a", serving: true, restarts: 0}
	down := primaryReading{pod: "db-0", uid: "a", restarts: -1, what: "unreadable"}

	t.Run("stops serving", func(t *testing.T) {
		var w primaryWatch
		if w.observe(1, up, at(0), after) {
			t.Fatal("a serving primary counted lost")
		}
		for _, s := range []float64{1, 5, 9.9} {
			if w.observe(1, down, at(s), after) {
				t.Fatalf("counted lost %vs after it last served, before the %s allowance", s, after)
			}
		}
		if !w.observe(1, down, at(10), after) {
			t.Fatal("not counted lost once it had not served for the allowance")
		}
		if !w.lostAt(1) || w.lostAt(2) {
			t.Fatalf("lostAt(1)=%t lostAt(2)=%t, want true, false", w.lostAt(1), w.lostAt(2))
		}
		if w.observe(1, down, at(11), after) {
			t.Fatal("counted lost twice")
		}
	})
	t.Run("busy is no reading", func(t *testing.T) {
		// A starved machine: /status does not answer, the port does. Not a loss, however long.
		busy := primaryReading{pod: "db-0", uid: "a", restarts: -1, busy: true, what: "unreadable, port open"}
		var w primaryWatch
		w.observe(1, up, at(0), after)
		for _, s := range []float64{5, 10, 30, 60} {
			if w.observe(1, busy, at(s), after) {
				t.Fatalf("a busy primary counted lost %vs after it last served", s)
			}
		}
		// Then gone for good (its port refused): lost, it last served long ago.
		if !w.observe(1, down, at(61), after) {
			t.Fatal("not counted lost once its port no longer accepted connections")
		}
	})
	t.Run("never served", func(t *testing.T) {
		var w primaryWatch
		for _, s := range []float64{0, 10, 60} {
			if w.observe(1, down, at(s), after) {
				t.Fatal("a primary that never served at its epoch counted lost")
			}
			if w.holding(1) {
				t.Fatal("renewals held for a primary still promoting or starting")
			}
		}
	})
	t.Run("serves again in time", func(t *testing.T) {
		var w primaryWatch
		w.observe(1, up, at(0), after)
		if w.holding(1) {
			t.Fatal("renewals held for a serving primary")
		}
		w.observe(1, down, at(8), after)
		if !w.holding(1) || w.holding(2) {
			t.Fatalf("holding(1)=%t holding(2)=%t once it read down, want true, false", w.holding(1), w.holding(2))
		}
		w.observe(1, up, at(9), after)
		if w.holding(1) {
			t.Fatal("renewals still held once it served again")
		}
		if w.observe(1, down, at(15), after) {
			t.Fatal("counted lost 6 s after it last served")
		}
	})
	t.Run("a new pod or epoch starts again", func(t *testing.T) {
		var w primaryWatch
		w.observe(1, up, at(0), after)
		if w.observe(1, primaryReading{pod: "db-0", uid: "b", restarts: -1}, at(20), after) {
			t.Fatal("a pod created anew counted lost for its predecessor's serving")
		}
		if w.observe(2, down, at(40), after) {
			t.Fatal("a new epoch counted lost for the last epoch's serving")
		}
		if w.observe(2, primaryReading{pod: "db-0", restarts: -1}, at(60), after) {
			t.Fatal("no pod at all counted lost")
		}
	})
	t.Run("crash loop", func(t *testing.T) {
		var w primaryWatch
		for i, s := range []float64{0, 2, 4} {
			r := up
			r.restarts = i
			if w.observe(1, r, at(s), after) {
				t.Fatalf("counted lost after %d restarts", i)
			}
		}
		r := up
		r.restarts = 3
		if !w.observe(1, r, at(6), after) {
			t.Fatal("3 restarts in 6 s, serving between them, not counted lost")
		}
	})
	t.Run("restarts far apart", func(t *testing.T) {
		var w primaryWatch
		for i, s := range []float64{0, 20, 40, 60, 80} {
			r := up
			r.restarts = i
			if w.observe(1, r, at(s), after) {
				t.Fatalf("a restart every 20 s counted as a crash loop (reading %d)", i)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		var w primaryWatch
		w.observe(1, up, at(0), 0)
		if w.observe(1, down, at(600), 0) {
			t.Fatal("counted lost with the watch off")
		}
	})
}

// TestReadPrimaryJudgesServing pins what counts as serving: postgres running as primary at the
// share's epoch (ready or not), or fenced by its own Lease judgement at that epoch; not stopped,
// unknown, a standby, a primary of an older epoch, or one still fenced from the epoch before.
func TestReadPrimaryJudgesServing(t *testing.T) {
	mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{
		DatabaseRef: dbfleetv1alpha1.DatabaseReference{Name: "db"}, Role: dbfleetv1alpha1.RolePrimary, Epoch: 3,
		Ordinals: dbfleetv1alpha1.MemberOrdinals{Start: 0},
	}}
	for _, tc := range []struct {
		in   dbfleetv1alpha1.InstanceStatus
		want bool
	}{
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: true, Epoch: 3}, true},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: false, Epoch: 3}, true},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceFenced, Epoch: 3, PromotedEpoch: 3}, true},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceFenced, Epoch: 3, PromotedEpoch: 2}, false},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: true, Epoch: 2}, false},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceStopped, Epoch: 3}, false},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceUnknown}, false},
		{dbfleetv1alpha1.InstanceStatus{Role: dbfleetv1alpha1.InstanceRunningStandby, Ready: true, Epoch: 3}, false},
	} {
		tc.in.Pod = "db-0"
		got := readPrimary(mdb, []instanceReport{{InstanceStatus: tc.in, uid: types.UID("u")}})
		if got.serving != tc.want || got.pod != "db-0" || got.uid != "u" {
			t.Errorf("%+v: serving=%t pod=%s uid=%s, want serving=%t on db-0/u", tc.in, got.serving, got.pod, got.uid, tc.want)
		}
	}
	if got := readPrimary(mdb, nil); got.serving || got.uid != "" {
		t.Errorf("no report: %+v, want not serving and no pod", got)
	}
}

func TestListeningTellsABusyInstanceFromAGoneOne(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing ever accepts: the kernel completes the connection all the same, as for a starved
	// process.
	open := "http://" + l.Addr().String() + "/status"
	if !listening(context.Background(), open) {
		t.Errorf("listening(%s) = false for a port with a listener", open)
	}
	_ = l.Close()
	if listening(context.Background(), open) {
		t.Errorf("listening(%s) = true once the listener closed", open)
	}
}
