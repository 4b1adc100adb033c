package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestPropagationLatency creates 20 DatabaseClusters of 3 replicas back to back (as one
// `kubectl apply` of 20 would), spread evenly over the members, and measures for each the time
// from its create to its StatefulSets existing in every member it is placed on, to all its Pods
// Ready there, and to the hub reporting it Available; it logs p50 and max of each, the figures
// in docs/performance.md.
func TestPropagationLatency(t *testing.T) {
	fed.requireHealthy(t)
	const ns, n = "latency", 20
	fed.setUp(t, ns, evenly())
	dbcs := make([]*dbfleetv1alpha1.DatabaseCluster, n)
	created := map[string]time.Time{}
	t.Cleanup(func() { fed.deleteAll(t, dbcs) })
	for i := range dbcs {
		dbcs[i] = newDatabase(ns, fmt.Sprintf("db-%02d", i), 3, "")
		created[dbcs[i].Name] = time.Now()
		if err := fed.hub.Create(context.Background(), dbcs[i]); err != nil {
			t.Fatal(err)
		}
	}

	stsAt, podsAt, availableAt := map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	await(t, 5*time.Minute, "every database Ready", func(ctx context.Context) (bool, error) {
		list := &dbfleetv1alpha1.DatabaseClusterList{}
		if err := fed.hub.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		shares, err := fed.sharesIn(ctx, ns)
		if err != nil {
			return false, err
		}
		now := time.Now()
		for i := range list.Items {
			d := &list.Items[i]
			since := now.Sub(created[d.Name])
			hasStatefulSets, podsReady := progress(d, shares[d.Name])
			if _, seen := stsAt[d.Name]; hasStatefulSets && !seen {
				stsAt[d.Name] = since
			}
			if _, seen := podsAt[d.Name]; podsReady && !seen {
				podsAt[d.Name] = since
			}
			if _, seen := availableAt[d.Name]; !seen && d.Status.ReadyReplicas == d.Spec.Replicas &&
				meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
				availableAt[d.Name] = since
			}
		}
		if len(availableAt) < n || len(podsAt) < n {
			return false, fmt.Errorf("%d of %d with StatefulSets, %d with every Pod Ready, %d Available", len(stsAt), n, len(podsAt), len(availableAt))
		}
		return true, nil
	})
	for _, m := range []struct {
		what string
		at   map[string]time.Duration
	}{
		{"create → StatefulSets in every placed member", stsAt},
		{"create → every Pod Ready in the members", podsAt},
		{"create → hub reports Available", availableAt},
	} {
		p50, worst := percentiles(m.at)
		t.Logf("%-46s p50 %5.2fs  max %5.2fs  (%d databases, 3 replicas each)", m.what, p50.Seconds(), worst.Seconds(), len(m.at))
	}
	start := time.Now()
	fed.deleteAll(t, dbcs)
	t.Logf("%d DatabaseClusters deleted, every member confirmed, in %.1fs", n, time.Since(start).Seconds())
}

// sharesIn reads what every member runs in namespace ns, by database.
func (f *federation) sharesIn(ctx context.Context, ns string) (map[string]map[string]share, error) {
	out := map[string]map[string]share{}
	at := func(db, m string) share {
		if out[db] == nil {
			out[db] = map[string]share{}
		}
		s := out[db][m]
		s.member = m
		return s
	}
	for _, m := range members {
		sts, pods := &appsv1.StatefulSetList{}, &corev1.PodList{}
		if err := f.clusters[m].List(ctx, sts, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if err := f.clusters[m].List(ctx, pods, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i := range sts.Items {
			db := sts.Items[i].Name
			s := at(db, m)
			s.sts = &sts.Items[i]
			out[db][m] = s
		}
		for _, p := range pods.Items {
			db := p.Labels[dbfleetv1alpha1.LabelDatabase]
			s := at(db, m)
			s.pods = append(s.pods, p)
			out[db][m] = s
		}
	}
	return out, nil
}

// percentiles are the median (nearest rank) and the maximum.
func percentiles(d map[string]time.Duration) (p50, worst time.Duration) {
	all := make([]time.Duration, 0, len(d))
	for _, v := range d {
		all = append(all, v)
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	return all[(len(all)+1)/2-1], all[len(all)-1]
}

// deleteAll deletes the databases at once and waits until the hub has let every one go.
func (f *federation) deleteAll(t *testing.T, dbcs []*dbfleetv1alpha1.DatabaseCluster) {
	t.Helper()
	for _, dbc := range dbcs {
		if dbc == nil {
			continue
		}
		if err := f.hub.Delete(context.Background(), dbc); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	await(t, 3*time.Minute, "every database deleted", func(ctx context.Context) (bool, error) {
		left := 0
		for _, dbc := range dbcs {
			if dbc == nil {
				continue
			}
			err := f.hub.Get(ctx, client.ObjectKeyFromObject(dbc), &dbfleetv1alpha1.DatabaseCluster{})
			if err == nil {
				left++
			} else if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		if left > 0 {
			return false, fmt.Errorf("%d still there", left)
		}
		return true, nil
	})
}
