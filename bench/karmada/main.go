// Command karmada-bench compares dbfleet's placement engine (pkg/placement) with Karmada v1.16's
// scheduler (pkg/scheduler/core's generic scheduler and its in-tree plugins) on the same fleets
// and policies, in one process: for each strategy and fleet size it runs interleaved rounds, each
// timing dbfleet then Karmada (the order alternates), and prints the medians:
//
//	RATIO <strategy> <clusters> <dbfleet ns/op> <karmada ns/op> <dbfleet/karmada>
//
// Strategies with "/spread" add spread constraints by region and by cluster. Run it with
// `make bench-karmada`; see docs/performance.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 9, "interleaved rounds per strategy and size (the median is printed)")
	roundTime := flag.Duration("round-time", 100*time.Millisecond, "how long each engine runs per round")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (both engines) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "karmada-bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "karmada-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*rounds, *roundTime); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "karmada-bench:", err)
		os.Exit(1)
	}
}

func run(rounds int, roundTime time.Duration) error {
	start := time.Now()
	for _, n := range Sizes {
		fleet := Fleet(n)
		d := NewDBFleet(fleet)
		k, err := NewKarmada(fleet)
		if err != nil {
			return err
		}
		for _, spread := range []bool{false, true} {
			for _, strategy := range Strategies {
				name := strategy
				if spread {
					name += "/spread"
				}
				p := Placement(strategy, spread)
				engines := [2]func() error{
					func() error { _, err := d.decide(strategy, p); return err },
					func() error { _, err := k.decide(strategy, p); return err },
				}
				var ns [2][]float64
				for r := range rounds {
					for i := range 2 {
						e := (r + i) % 2 // alternate which engine runs first
						v, err := measure(engines[e], roundTime)
						if err != nil {
							return fmt.Errorf("%s, %d clusters, engine %d: %w", name, n, e, err)
						}
						ns[e] = append(ns[e], v)
					}
				}
				dm, km := median(ns[0]), median(ns[1])
				line := fmt.Sprintf("RATIO %s %d %.0f %.0f %.3f", name, n, dm, km, dm/km)
				fmt.Println(line)
				fmt.Fprintf(os.Stderr, "progress: %s %d clusters done (%s elapsed)\n", name, n, time.Since(start).Round(time.Second))
			}
		}
	}
	fmt.Fprintf(os.Stderr, "done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// measure runs f repeatedly for at least d (and at least once) and returns ns per call.
func measure(f func() error, d time.Duration) (float64, error) {
	var calls int
	start := time.Now()
	for {
		if err := f(); err != nil {
			return 0, err
		}
		calls++
		if el := time.Since(start); el >= d {
			return float64(el.Nanoseconds()) / float64(calls), nil
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
