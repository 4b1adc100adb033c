package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// nearestRank is the p-th percentile of sorted (nearest rank).
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (p passResult) printSteps(w *os.File) {
	for i, name := range stepNames {
		v := slices.Clone(p.steps[i])
		slices.Sort(v)
		fmt.Fprintf(w, "LATENCY %-18q %-44s p50 %6.3fs  p99 %6.3fs  max %6.3fs  (n=%d)\n", p.name, name,
			nearestRank(v, 50).Seconds(), nearestRank(v, 99).Seconds(), v[len(v)-1].Seconds(), len(v))
	}
	fmt.Fprintf(w, "HUB     %-18q %.0f databasecluster reconciles (%.2f per database), %.0f DatabaseCluster status writes (%.2f), %.0f MemberDatabase status writes (%.2f)\n",
		p.name, p.reconcile, p.reconcile/float64(p.n), p.dbcWrites, p.dbcWrites/float64(p.n), p.mdbWrites, p.mdbWrites/float64(p.n))
}

func (res *results) print(o options) {
	fmt.Println()
	fmt.Printf("Command: `make bench-latency`  # bin/benchlatency %s\n\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("Machine: %s; load average after: %s\n\n", res.machine, res.loadAfter)
	fmt.Printf("Each database: postgres, %d replicas divided evenly over the members by static weights.\n\n", o.replicas)
	fmt.Println("| pass | step | p50 | p99 | max |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, p := range res.passes {
		for i, name := range stepNames {
			v := slices.Clone(p.steps[i])
			slices.Sort(v)
			fmt.Printf("| %s | %s | %.2f s | %.2f s | %.2f s |\n", p.name, name,
				nearestRank(v, 50).Seconds(), nearestRank(v, 99).Seconds(), v[len(v)-1].Seconds())
		}
	}
	fmt.Println()
	fmt.Println("| pass | databasecluster reconciles | DatabaseCluster status writes | MemberDatabase status writes |")
	fmt.Println("|---|---:|---:|---:|")
	for _, p := range res.passes {
		fmt.Printf("| %s | %.0f (%.2f per database) | %.0f (%.2f) | %.0f (%.2f) |\n", p.name,
			p.reconcile, p.reconcile/float64(p.n), p.dbcWrites, p.dbcWrites/float64(p.n), p.mdbWrites, p.mdbWrites/float64(p.n))
	}
}

// writeSamples writes one line per database: its pass, name, create time and the four figures in
// seconds, in the order they were created.
func (res *results) writeSamples(path string) error {
	var b strings.Builder
	b.WriteString("pass,database,created,statefulsets_s,pods_ready_s,available_s,pods_ready_to_available_s,memberdatabases_s\n")
	for _, p := range res.passes {
		for i, db := range p.dbs {
			fmt.Fprintf(&b, "%s,%s,%s", p.name, db, p.created[i].UTC().Format(time.RFC3339Nano))
			for s := range p.steps {
				fmt.Fprintf(&b, ",%.3f", p.steps[s][i].Seconds())
			}
			b.WriteString("\n")
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write samples: %w", err)
	}
	logf("every database's figures: %s", path)
	return nil
}
