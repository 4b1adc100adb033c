package hub

import (
	"context"
	"slices"
	"strings"
	"testing"

	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
)

func TestRegistryEnabled(t *testing.T) {
	noop := func(context.Context, mcmanager.Manager, Config) error { return nil }
	r := Registry{"databasecluster": noop, "clusterhealth": noop, "push": noop}
	for _, tc := range []struct {
		spec    []string
		want    []string
		wantErr string
	}{
		{spec: []string{"*"}, want: []string{"clusterhealth", "databasecluster", "push"}},
		{spec: []string{"*", "-push"}, want: []string{"clusterhealth", "databasecluster"}},
		{spec: []string{"databasecluster"}, want: []string{"databasecluster"}},
		{spec: []string{"-push", "*"}, want: []string{"clusterhealth", "databasecluster", "push"}},
		{spec: []string{}, want: nil},
		{spec: []string{"*", "-pushh"}, wantErr: `unknown controller "pushh"`},
		{spec: []string{"sheduler"}, wantErr: "known: clusterhealth, databasecluster, push"},
	} {
		got, err := r.Enabled(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Enabled(%v) error = %v, want %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Enabled(%v) = %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
}
