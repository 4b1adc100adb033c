package plan

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/dbfleet/dbfleet/pkg/crdvalidation"
)

// CheckStatus admits the status the hub would write for every planned DatabaseCluster as the API
// server would admit the status update, and records what it would refuse in Result.Refused (an
// epoch that overflowed, say). Such a result is not schedulable: the hub could not record it.
func CheckStatus(ctx context.Context, results []Result) error {
	v, err := crdvalidation.BuiltIn()
	if err != nil {
		return fmt.Errorf("load the CRDs hub plan carries: %w", err)
	}
	// The schema validator costs about 0.1 ms a status, the API server's own price, so a fleet of
	// 10,000 is checked on every core.
	workers := min(runtime.GOMAXPROCS(0), len(results))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(results); i += workers {
				r := &results[i]
				status, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(&r.Database.Status)
				if err != nil {
					errs[w] = fmt.Errorf("DatabaseCluster %s/%s: %w", r.Database.Namespace, r.Database.Name, err)
					return
				}
				r.Refused = v.AdmitStatus(ctx, "DatabaseCluster", status)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
