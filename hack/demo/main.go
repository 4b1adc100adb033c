package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

type demo struct {
	f *federation
	t timings
	// stoppedAgent is the agent the demo stopped and has not started again; partitioned the
	// member it partitioned and has not healed: cleanup restores both.
	stoppedAgent, partitioned string
	writer                    *writer // the demo's client, from step 3
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exitWhenDone := os.Getenv("DEMO_EXIT") != "" && os.Getenv("DEMO_EXIT") != "0"
	d := &demo{}
	err := d.run(ctx)
	interrupted := ctx.Err() != nil
	stop() // a second Ctrl-C kills the demo, not the cleanup
	switch {
	case interrupted:
		say("\nInterrupted.")
		d.cleanup(true)
		os.Exit(130)
	case err != nil:
		out.settle()
		say("")
		say("DEMO FAILED: %v", err)
		if d.f != nil {
			say("Logs are in %s/logs/, pids in %s/pids/.", stateDir, stateDir)
		}
		d.cleanup(exitWhenDone)
		if !exitWhenDone && d.f != nil && d.f.startedByUs {
			say("The federation is left running for inspection; 'make localfed-down' stops it.")
		}
		os.Exit(1)
	}
	d.explore()
	if exitWhenDone {
		d.cleanup(true)
		return
	}
	para("The federation keeps running; the table below follows the database. Press Ctrl-C to stop the "+
		"federation and remove %s/.", stateDir)
	d.follow()
	say("")
	d.cleanup(true)
}

func (d *demo) run(ctx context.Context) error {
	begin := time.Now()
	startPhase("federation", "Step 1/6: a local federation")
	f, err := ensureFederation(ctx)
	if err != nil {
		return err
	}
	d.f = f
	d.t.federationUp = time.Since(begin).Round(time.Second)
	if len(f.members) < 2 {
		return errors.New("the demo needs at least two members (localfed up --members)")
	}
	for _, step := range []func(context.Context) error{d.place, d.write, d.agentAway, d.failover, d.recover} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// cleanup restores a stopped agent, and tears the federation down when the demo brought it up
// and teardown is wanted.
func (d *demo) cleanup(teardown bool) {
	if d.f == nil {
		return
	}
	ctx := context.Background()
	if teardown && d.f.startedByUs {
		say("Stopping the local federation (make localfed-down).")
		if err := localfed(ctx, "down"); err != nil {
			say("localfed down: %v", err)
		}
		return
	}
	if d.stoppedAgent != "" {
		say("Starting %s again.", d.stoppedAgent)
		if err := localfed(ctx, "start", d.stoppedAgent); err != nil {
			say("localfed start %s: %v", d.stoppedAgent, err)
		}
	}
	if d.partitioned != "" {
		say("Healing %s's partition.", d.partitioned)
		if err := localfed(ctx, "heal", d.partitioned); err != nil {
			say("localfed heal %s: %v", d.partitioned, err)
		}
	}
	if teardown {
		para("The federation was running before the demo, so it is left running ('make localfed-down' stops it).")
	}
}

func (d *demo) explore() {
	t := d.t
	startPhase("done", "Done")
	para("Measured: federation ready in %s; database placed %.0fs and all replicas Ready %.0fs after apply; "+
		"with the primary's agent stopped, the longest stretch without an acknowledged row was %s and nothing failed over; "+
		"after the partition: the old primary refused writes at +%.1fs, Ready=Unknown at +%.0fs, new primary at +%.0fs, "+
		"writes acknowledged again at +%.1fs (no write accepted for %s; %d acknowledged rows lost), replicas re-placed at +%.0fs, "+
		"all Ready again at +%.0fs; after it healed: Ready=True at +%.0fs, settled at +%.0fs; after the rebalance "+
		"its standby streamed at +%.0fs.",
		t.federationUp, t.scheduled.Seconds(), t.ready.Seconds(), t.agentGap.Round(10*time.Millisecond), t.refused.Seconds(), t.unknown.Seconds(), t.promoted.Seconds(),
		t.resumed.Seconds(), t.writeGap, t.lost, t.replaced.Seconds(), t.failed.Seconds(), t.back.Seconds(), t.reconverged.Seconds(), t.rejoined.Seconds())
	say("")
	say("Explore (the hub and each member have an admin kubeconfig in %s/):", stateDir)
	hub := "kubectl --kubeconfig " + kubeconfig(layout.HubCluster)
	cmds := [][2]string{
		{hub + " get mc", "members: region, zone, Ready, heartbeat"},
		{hub + " get dbc,mdb -A", "the database and its per-cluster shares"},
		{fmt.Sprintf("%s get dbc -n %s %s -o yaml", hub, demoNamespace, demoDatabase), "placements, primary, epoch, conditions"},
		{fmt.Sprintf("%s get events -n %s", hub, demoNamespace), "ReplicasMoved, PrimaryChanged"},
	}
	for _, m := range d.f.members {
		cmds = append(cmds, [2]string{fmt.Sprintf("kubectl --kubeconfig %s get sts,pods,pvc,lease -n %s -L dbfleet.io/role", kubeconfig(m), demoNamespace), ""})
	}
	cmds = append(cmds,
		[2]string{"bin/localfed status", "every process and its pid"},
		[2]string{fmt.Sprintf("bin/localfed partition %s; bin/localfed heal %s", d.f.members[1], d.f.members[1]), "another failover (docs/localfed.md)"})
	width := 0
	for _, c := range cmds {
		if c[1] != "" {
			width = max(width, len(c[0]))
		}
	}
	for _, c := range cmds {
		if c[1] == "" {
			say("  %s", c[0])
			continue
		}
		say("  %-*s  # %s", width, c[0], c[1])
	}
}

// follow keeps the live table (and the timeline) going until Ctrl-C.
func (d *demo) follow() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &watcher{f: d.f}
	tick := time.NewTicker(2 * pollInterval)
	defer tick.Stop()
	for {
		w.poll(ctx)
		select {
		case <-ctx.Done():
			out.settle()
			return
		case <-tick.C:
		}
	}
}
