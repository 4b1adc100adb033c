package instance

import (
	"sync"
	"time"

	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// guard fences the primary at its Lease's FenceAt even when the manager's loop is busy or the
// API server is out of reach: the loop re-arms it with every fresh judgement, and the timer
// fires at the last deadline it was given.
type guard struct {
	fire func(epoch int64, writableUntil time.Time)

	mu            sync.Mutex
	timer         *time.Timer
	generation    int
	epoch         int64
	fenceAt       time.Time
	writableUntil time.Time
}

// arm (re)sets the deadline to j's for epoch.
func (g *guard) arm(epoch int64, j decide.LeaseJudgement) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil && g.epoch == epoch && g.fenceAt.Equal(j.FenceAt) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.epoch, g.fenceAt, g.writableUntil = epoch, j.FenceAt, j.WritableUntil
	g.generation++
	generation, writableUntil := g.generation, j.WritableUntil
	g.timer = time.AfterFunc(time.Until(j.FenceAt), func() {
		// A timer that fired while being replaced by a later deadline is not the deadline.
		g.mu.Lock()
		current := g.generation == generation && g.timer != nil
		g.mu.Unlock()
		if current {
			g.fire(epoch, writableUntil)
		}
	})
}

// disarm stops the timer (postgres no longer runs as primary).
func (g *guard) disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

// deadline is the last WritableUntil the guard was armed with (zero if never).
func (g *guard) deadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writableUntil
}
