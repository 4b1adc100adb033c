package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// down stops every process of the federation by its pid file, in waves (agents and hub, then the
// members' controllers, scheduler and kwok, then the API servers, then etcd), and removes the
// state directory. When a process cannot be stopped the directory is kept, pid files included.
func down(d layout.Dir, removeState bool) error {
	if !d.Exists() {
		say("no local federation in %s: nothing to stop", rel(string(d)))
		return nil
	}
	names, err := d.PidNames()
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
		if err := stopAll(d, wave); err != nil {
			return fmt.Errorf("%w: %s kept", err, rel(string(d)))
		}
	}
	if alive := aliveComponents(d); len(alive) > 0 {
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
	case component == layout.Etcd:
		return 3
	case strings.HasPrefix(component, layout.APIServer("")):
		return 2
	case strings.HasPrefix(component, layout.ControllerManager("")), strings.HasPrefix(component, layout.Scheduler("")),
		strings.HasPrefix(component, layout.Kwok("")):
		return 1
	default: // agents, the hub
		return 0
	}
}
