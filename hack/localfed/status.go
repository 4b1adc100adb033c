package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// status prints each component, its pid and whether it is alive; it fails when one is not.
func status(d stateDir) error {
	st, err := d.load()
	if err != nil {
		if !d.exists() {
			fmt.Printf("no local federation in %s (make localfed-up starts one)\n", rel(string(d)))
			return errNothingRuns
		}
		return err
	}
	names := []string{}
	for _, c := range st.Components {
		names = append(names, c.Name)
	}
	extra, _ := d.pidNames()
	for _, n := range extra {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	fmt.Printf("local federation in %s, started %s ago; hub %s, members %s\n", rel(string(d)),
		time.Since(st.Started).Round(time.Second), st.Servers["hub"], strings.Join(memberNames(st.Members), ", "))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "COMPONENT\tPID\tSTATE\tLOG")
	down := 0
	for _, n := range names {
		pid, alive := d.pidStatus(n)
		state, pidText := "running", fmt.Sprint(pid)
		switch {
		case pid == 0:
			state, pidText = "stopped (no pid file)", "-"
			down++
		case !alive:
			state = "dead"
			down++
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", n, pidText, state, rel(d.logFile(n)))
	}
	_ = w.Flush()
	if down == len(names) {
		return errNothingRuns
	}
	if down > 0 {
		return fmt.Errorf("%d of %d components are not running", down, len(names))
	}
	return nil
}

// errNothingRuns: status exits 3 when no process of the federation is alive (1 when some are not).
var errNothingRuns = errors.New("no process of the federation is running")

// startComponent starts a stopped component again, exactly as up started it.
func startComponent(d stateDir, name string) error {
	st, err := d.load()
	if err != nil {
		return err
	}
	c, ok := st.component(name)
	if !ok {
		return fmt.Errorf("no component %q; known: %s", name, strings.Join(componentNames(st), ", "))
	}
	if pid, alive := d.pidStatus(name); alive {
		return fmt.Errorf("%s is already running (pid %d)", name, pid)
	}
	r, err := d.start(c)
	if err != nil {
		return err
	}
	// A bad start shows within a moment (a port taken, a file gone).
	select {
	case <-r.exited:
		return fmt.Errorf("%s (pid %d) %s at once; its log %s ends:\n%s", name, r.pid, r.exitError(), rel(r.log), tail(r.log, 15))
	case <-time.After(time.Second):
	}
	say("%s: started (pid %d), log %s", name, r.pid, rel(r.log))
	return nil
}

// stopComponent stops one component by its pid file.
func stopComponent(d stateDir, name string) error {
	if _, err := os.Stat(d.pidFile(name)); errors.Is(err, os.ErrNotExist) {
		if st, lerr := d.load(); lerr == nil {
			if _, ok := st.component(name); !ok {
				return fmt.Errorf("no component %q; known: %s", name, strings.Join(componentNames(st), ", "))
			}
		}
	}
	what, err := d.stop(name)
	if err != nil {
		return err
	}
	say("%s: %s", name, what)
	return nil
}

func componentNames(st *State) []string {
	var out []string
	for _, c := range st.Components {
		out = append(out, c.Name)
	}
	return out
}
