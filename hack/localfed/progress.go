package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dbfleet/dbfleet/internal/process"
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

// waitReady polls check (each attempt bounded to 5 s) until it succeeds, one of procs exits, ctx
// ends or timeout passes. The error names the component, the last thing check said and the tail
// of its log.
func waitReady(ctx context.Context, what string, timeout time.Duration, check process.Probe, procs ...*process.Process) error {
	return process.Wait(ctx, what, timeout, check,
		process.Interval(250*time.Millisecond), process.AttemptTimeout(5*time.Second), process.Watching(procs...))
}
