package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// down stops every process of the federation by its pid file, in waves (agents and hub, then the
// members' controllers, scheduler and kwok, then the API servers, then etcd), and removes the
// state directory. When a process cannot be stopped the directory is kept, pid files included.
func down(d stateDir, removeState bool) error {
	if !d.exists() {
		say("no local federation in %s: nothing to stop", rel(string(d)))
		return nil
	}
	names, err := d.pidNames()
	if err != nil {
		return err
	}
	waves := make([][]string, 4)
	for _, n := range names {
		waves[stopWave(n)] = append(waves[stopWave(n)], n)
	}
	for _, wave := range waves {
		if len(wave) == 0 {
			continue
		}
		slices.Sort(wave)
		if err := d.stopAll(wave); err != nil {
			return fmt.Errorf("%w: %s kept", err, rel(string(d)))
		}
	}
	if alive := d.aliveComponents(); len(alive) > 0 {
		return fmt.Errorf("still running: %s; %s kept", strings.Join(alive, ", "), rel(string(d)))
	}
	if !removeState {
		return nil
	}
	if err := os.RemoveAll(string(d)); err != nil {
		return err
	}
	say("stopped %d processes and removed %s", len(names), rel(string(d)))
	return nil
}

// stopWave orders shutdown so nothing waits on a server already gone.
func stopWave(component string) int {
	switch {
	case component == "etcd":
		return 3
	case strings.HasPrefix(component, "apiserver-"):
		return 2
	case strings.HasPrefix(component, "controller-manager-"), strings.HasPrefix(component, "scheduler-"),
		strings.HasPrefix(component, "kwok-"):
		return 1
	default: // agents, the hub
		return 0
	}
}

// aliveComponents are the components whose pid file names a live process of this federation.
func (d stateDir) aliveComponents() []string {
	names, _ := d.pidNames()
	var alive []string
	for _, n := range names {
		if _, ok := d.pidStatus(n); ok {
			alive = append(alive, n)
		}
	}
	slices.Sort(alive)
	return alive
}
