package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// podsPerNode is what a kwok Node of localfed takes.
const podsPerNode = 100 // of its 110, leaving room for anything else scheduled there

// namespace is where the benchmark's databases live, on the hub and in every member.
const namespace = "bench-latency"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-latency:", err)
		os.Exit(1)
	}
}

type options struct {
	bin, dir     string
	one, burst   int
	replicas     int32
	keep         bool
	waitOne      time.Duration
	waitBurst    time.Duration
	localfedArgs []string
	samples      string
}

func run() error {
	var o options
	var upFlags string
	flag.StringVar(&o.bin, "bin", "bin", "directory of hub, agent and localfed; the Kubernetes binaries are in its k8s/")
	flag.StringVar(&o.dir, "dir", "_output/bench-latency/fed", "the federation's state directory (brought up and down by this command)")
	flag.IntVar(&o.one, "one", 100, "databases created one at a time, each once the previous one is Available")
	flag.IntVar(&o.burst, "burst", 100, "databases then created back to back")
	replicas := flag.Int("replicas", 3, "replicas of each database, divided evenly over the members")
	flag.BoolVar(&o.keep, "keep", false, "leave the federation running (stop it with `bin/localfed down --dir DIR`)")
	flag.DurationVar(&o.waitOne, "wait-one", 2*time.Minute, "how long one database of the first pass may take")
	flag.DurationVar(&o.waitBurst, "wait-burst", 10*time.Minute, "how long the burst may take")
	flag.StringVar(&upFlags, "up-flags", "", "extra flags for `localfed up`, space-separated")
	flag.StringVar(&o.samples, "samples", "_output/bench-latency/samples.csv", "where to write every database's figures (CSV; empty: nowhere)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	o.replicas = int32(*replicas)
	o.localfedArgs = strings.Fields(upFlags)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	localfed := filepath.Join(o.bin, "localfed")
	// A kwok Node takes 110 pods; the first pass's databases are deleted before the burst, but
	// their claims stay (the StatefulSets' retention policy), so each pass needs volumes.
	members := 3
	perMember := (o.one + o.burst) * ((int(o.replicas) + members - 1) / members)
	nodes := min(max((max(o.one, o.burst)*((int(o.replicas)+members-1)/members)+podsPerNode-1)/podsPerNode, 1), 9)
	up := append([]string{"up", "--dir", dir, "--bin", o.bin, "--nodes", "kwok",
		"--nodes-per-member", strconv.Itoa(nodes), "--volumes", strconv.Itoa(perMember + 10)}, o.localfedArgs...)
	machine := describeMachine()
	logf("machine: %s", machine)
	logf("%s %s", localfed, strings.Join(up, " "))
	if err := command(ctx, localfed, up...); err != nil {
		return errors.Join(fmt.Errorf("localfed up: %w", err), teardown(localfed, dir, o.keep))
	}
	res, runErr := measure(ctx, layout.Dir(dir), o)
	downErr := teardown(localfed, dir, o.keep)
	if res != nil {
		res.machine, res.loadAfter = machine, loadAverage()
		res.print(o)
		if o.samples != "" {
			if err := res.writeSamples(o.samples); err != nil {
				runErr = errors.Join(runErr, err)
			}
		}
	}
	return errors.Join(runErr, downErr)
}

func teardown(localfed, dir string, keep bool) error {
	if keep {
		logf("federation kept: stop it with %s down --dir %s", localfed, dir)
		return nil
	}
	if err := command(context.Background(), localfed, "down", "--dir", dir); err != nil {
		return fmt.Errorf("localfed down: %w", err)
	}
	return nil
}

func command(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func logf(format string, args ...any) {
	fmt.Printf("[bench-latency %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}
