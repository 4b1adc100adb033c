package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// down stops every process of the federation by its pid file, in waves (agents and hub, then the
// members' controllers, scheduler, kwok and kubelets; then the real nodes' pods, containerds and
// mounts, see teardown.go; then the API servers; then the partitions' rules and chains, see
// partition.go, and the nodes' network; then etcd), checks that nothing is
// left, and removes the state directory. When something cannot be stopped or removed the
// directory is kept, pid files included, and down says what is left.
func down(d layout.Dir, removeState bool) error {
	if !d.Exists() {
		say("no local federation in %s: nothing to stop", rel(string(d)))
		return nil
	}
	st, err := d.Load()
	if err != nil {
		st = &layout.State{} // an up that crashed before writing state.json started nothing real
	}
	names, err := d.PidNames()
	if err != nil {
		return err
	}
	waves := make([][]string, stopWaves)
	for _, n := range names {
		waves[stopWave(n)] = append(waves[stopWave(n)], n)
	}
	ctx := context.Background()
	for i, wave := range waves {
		if i == nodesWave {
			if err := tearDownNodes(ctx, d, st); err != nil {
				return fmt.Errorf("real nodes: %w: %s kept", err, rel(string(d)))
			}
		}
		if i == networkWave {
			if err := healAll(d, st); err != nil {
				return fmt.Errorf("partitions: %w: %s kept", err, rel(string(d)))
			}
			if err := removeNetwork(ctx, d, st); err != nil {
				return fmt.Errorf("real nodes' network: %w: %s kept", err, rel(string(d)))
			}
		}
		wave = slices.DeleteFunc(wave, func(c string) bool { return !exists(d.PidFile(c)) }) // stopped on the way
		if len(wave) == 0 {
			continue
		}
		slices.Sort(wave)
		if err := stopAll(d, wave); err != nil {
			return fmt.Errorf("%w: %s kept", err, rel(string(d)))
		}
	}
	if left := leftovers(ctx, d, st); len(left) > 0 {
		return fmt.Errorf("still there after stopping everything: %s; %s kept", strings.Join(left, ", "), rel(string(d)))
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

// The waves of down; the real nodes are torn down before nodesWave, and their network (where
// the members' API servers listen) once the API servers are stopped, before networkWave.
const (
	stopWaves   = 5
	nodesWave   = 2
	networkWave = 4
)

// stopWave orders shutdown so nothing waits on a server already gone, and no kubelet restarts a
// pod while the nodes are emptied.
func stopWave(component string) int {
	switch {
	case component == layout.Etcd:
		return 4
	case strings.HasPrefix(component, layout.APIServer("")):
		return 3
	case strings.HasPrefix(component, layout.Containerd("")):
		return 2 // normally already stopped by tearDownNodes
	case strings.HasPrefix(component, layout.ControllerManager("")), strings.HasPrefix(component, layout.Scheduler("")),
		strings.HasPrefix(component, layout.Kwok("")), strings.HasPrefix(component, layout.Kubelet("")):
		return 1
	default: // agents, the hub
		return 0
	}
}
