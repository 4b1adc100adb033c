package main

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// Processes are started detached (a session of their own, stdin /dev/null, output to their log
// file) so they outlive `localfed up`, and are stopped only by the pid in their pid file, after
// checking that the pid still runs a command of this federation (its command line names the
// state directory), so a recycled pid is never signalled. internal/process does both.

// stopTimeout is how long a process gets after SIGTERM; kube-apiserver can take more than 10 s.
const stopTimeout = 15 * time.Second

// portAttempts is how often a server is started on fresh ports when another program took one of
// its ports between their reservation's release and the server's bind.
const portAttempts = 3

// start runs c detached, with its log and pid file; ports are released just before it starts.
func start(d layout.Dir, c layout.Component, ports ...*process.Port) (*process.Process, error) {
	return process.Start(process.Spec{
		Name: c.Name, Args: c.Args, Env: c.Env, Detach: true, Ports: ports, Group: c.Group,
		LogFile: d.LogFile(c.Name), PidFile: d.PidFile(c.Name),
	})
}

// pidStatus is a component's pid and whether it is alive; pid 0 when it has no pid file.
func pidStatus(d layout.Dir, component string) (int, bool) {
	pid, err := process.ReadPidFile(d.PidFile(component))
	if err != nil {
		return 0, false
	}
	return pid, process.Running(pid, string(d))
}

// stop ends a component by its pid file: SIGTERM, SIGKILL after stopTimeout. It reports what it
// did; a component already gone is not an error. The pid file is removed once it is gone.
func stop(d layout.Dir, component string) (string, error) {
	s, err := process.StopPidFile(d.PidFile(component), string(d), stopTimeout)
	if errors.Is(err, fs.ErrNotExist) {
		return "no pid file", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", component, err)
	}
	return s.String(), nil
}

// stopAll stops components in parallel and prints one line each.
func stopAll(d layout.Dir, components []string) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range components {
		wg.Go(func() {
			what, err := stop(d, c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				say("%s: %v", c, err)
				return
			}
			say("%s: %s", c, what)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// aliveComponents are the components whose pid file names a live process of this federation.
func aliveComponents(d layout.Dir) []string {
	names, _ := d.PidNames()
	var alive []string
	for _, n := range names {
		if _, ok := pidStatus(d, n); ok {
			alive = append(alive, n)
		}
	}
	slices.Sort(alive)
	return alive
}

// rel is p relative to the working directory when it is below it, for messages.
func rel(p string) string { return process.DisplayPath(p) }
