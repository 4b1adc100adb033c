package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress lines carry the time since the command started; errors name the component and its log.

var (
	began  = time.Now()
	sayMu  sync.Mutex
	prefix = "localfed"
)

func say(format string, args ...any) {
	sayMu.Lock()
	defer sayMu.Unlock()
	fmt.Fprintf(os.Stdout, "[%s %5.1fs] %s\n", prefix, time.Since(began).Seconds(), fmt.Sprintf(format, args...))
}

// waitReady polls check until it succeeds, one of procs exits, ctx ends or timeout passes. The
// error names the component, the last thing check said and the tail of its log.
func waitReady(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error, procs ...*running) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for _, r := range procs {
			if msg := r.exitError(); msg != "" {
				return fmt.Errorf("%s (pid %d) %s before %s was ready; its log %s ends:\n%s", r.name, r.pid, msg, what, rel(r.log), tail(r.log, 15))
			}
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		// A check cut short by the overall timeout says nothing: keep what the one before said.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.Canceled {
				return fmt.Errorf("%s: interrupted", what)
			}
			var logs []string
			for _, r := range procs {
				if r.exitError() != "" {
					continue // reported above on the next round; not expected here
				}
				logs = append(logs, rel(r.log))
			}
			msg := fmt.Sprintf("%s not ready after %s: %v", what, timeout, last)
			if len(procs) > 0 {
				msg += fmt.Sprintf("; see %s, the first ends:\n%s", strings.Join(logs, ", "), tail(procs[0].log, 15))
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}
