package databasecluster

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// rollMDB is a share's MemberDatabase as its agent left it: written with version asked, at
// epoch, reporting status.version runs and Available as available.
func rollMDB(role dbfleetv1alpha1.ReplicaRole, epoch int64, asked, runs string, available bool) *dbfleetv1alpha1.MemberDatabase {
	m := &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	m.Spec.Role, m.Spec.Epoch = role, epoch
	m.Spec.Database = dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: asked, Image: "registry.example/postgres:" + asked}
	m.Status.ObservedGeneration, m.Status.Epoch, m.Status.Version = 4, epoch, runs
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionAvailable, Status: status, Reason: "Test"})
	return m
}

func TestPlanRoll(t *testing.T) {
	primary := func(role bool, epoch int64, asked, runs string, available bool) *dbfleetv1alpha1.MemberDatabase {
		r := dbfleetv1alpha1.RoleReplica
		if role {
			r = dbfleetv1alpha1.RolePrimary
		}
		return rollMDB(r, epoch, asked, runs, available)
	}
	standby := func(asked, runs string, available bool) *dbfleetv1alpha1.MemberDatabase {
		return rollMDB(dbfleetv1alpha1.RoleReplica, 1, asked, runs, available)
	}
	memberDB := func(cluster string, mdb *dbfleetv1alpha1.MemberDatabase) rollShare {
		return rollShare{cluster: cluster, mdb: mdb, reachable: true}
	}
	silent := func(s rollShare) rollShare { s.reachable = false; return s }
	atEpoch := func(cluster string, epoch int64) *dbfleetv1alpha1.PrimaryStatus {
		return &dbfleetv1alpha1.PrimaryStatus{Cluster: cluster, Epoch: epoch}
	}
	const old, next = "16.4", "16.5"
	want := &dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: next, Image: "registry.example/postgres:" + next}
	for _, tc := range []struct {
		name     string
		want     *dbfleetv1alpha1.DatabaseTemplate
		primary  *dbfleetv1alpha1.PrimaryStatus
		placed   []rollShare
		evicting []rollShare
		hold     []string
		to       []string
		step     string // a part of the step; "" means no roll
	}{
		{name: "three shares: the first standby's share first, the others kept",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(old, old, true)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))},
			hold:    []string{"b", "c"}, step: "standbys first: updating the share on a (0 of 2 standby shares done); the primary's share on b stays on 16.4"},
		{name: "the next waits until the first reports the new version",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, old, true)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))},
			hold:    []string{"b", "c"}, step: "waiting for the share on a to run 16.5 and be Available"},
		{name: "and is Available",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, next, false)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))},
			hold:    []string{"b", "c"}, step: "waiting for the share on a"},
		{name: "and its agent is heard",
			primary: atEpoch("b", 1),
			placed:  []rollShare{silent(memberDB("a", standby(next, next, true))), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))},
			hold:    []string{"b", "c"}, step: "waiting for the share on a"},
		{name: "then the second standby's share",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, next, true)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))},
			hold:    []string{"b"}, step: "updating the share on c (1 of 2 standby shares done)"},
		{name: "a restart mid-roll resumes from what the shares report",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, next, true)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(next, old, false))},
			hold:    []string{"b"}, step: "waiting for the share on c to run 16.5"},
		{name: "no standby is touched while the primary is not Available",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, next, true)), memberDB("b", primary(true, 1, old, old, false)), memberDB("c", standby(old, old, true))},
			hold:    []string{"b", "c"}, step: "waiting for the primary on b to be Available at epoch 1 before updating the share on c"},
		{name: "every standby on the new version: switch the primary over to one of them",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, next, true)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(next, next, true))},
			hold:    []string{"b"}, to: []string{"a", "c"}, step: "switching the primary over from b to one of them (a, c)"},
		{name: "the switchover goes on while the old primary steps down, a target not Available for a moment",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, next, false)), memberDB("b", primary(false, 2, old, old, true)), memberDB("c", standby(next, next, true))},
			hold:    []string{"b"}, to: []string{"a", "c"}, step: "switching the primary over from b"},
		{name: "switched over: the former primary's share waits for the new primary at its epoch",
			primary: atEpoch("a", 2),
			placed: []rollShare{memberDB("a", func() *dbfleetv1alpha1.MemberDatabase {
				m := primary(true, 2, next, next, true)
				m.Status.Epoch = 1 // the agent has not acted on epoch 2 yet
				return m
			}()), memberDB("b", primary(false, 2, old, old, true)), memberDB("c", standby(next, next, true))},
			hold: []string{"b"}, step: "waiting for the primary on a to be Available at epoch 2 before updating the share on b"},
		{name: "the new primary takes writes: the former primary's share is updated",
			primary: atEpoch("a", 2),
			placed:  []rollShare{memberDB("a", primary(true, 2, next, next, true)), memberDB("b", primary(false, 2, old, old, true)), memberDB("c", standby(next, next, true))},
			step:    "the primary runs 16.5 on a at epoch 2; updating the share on b"},
		{name: "until it reports the new version",
			primary: atEpoch("a", 2),
			placed:  []rollShare{memberDB("a", primary(true, 2, next, next, true)), memberDB("b", primary(false, 2, next, old, false)), memberDB("c", standby(next, next, true))},
			step:    "waiting for the share on b to run 16.5"},
		{name: "every share runs it: the roll is over",
			primary: atEpoch("a", 2),
			placed:  []rollShare{memberDB("a", primary(true, 2, next, next, true)), memberDB("b", primary(false, 2, next, next, true)), memberDB("c", standby(next, next, true))}},
		{name: "a single share updates in place",
			primary: atEpoch("a", 1),
			placed:  []rollShare{memberDB("a", primary(true, 1, old, old, true))},
			step:    "updating the only share, on a, to 16.5 in place"},
		{name: "an image change alone goes everywhere at once",
			want:    &dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: old, Image: "mirror.example/postgres:16.4"},
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(old, old, true)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))}},
		{name: "another engine's version goes everywhere at once",
			want:    &dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EngineMySQL, Version: "8.4"},
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby("8.0", "8.0", true)), memberDB("b", primary(true, 1, "8.0", "8.0", true))}},
		{name: "a new database starts at its version",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", nil), memberDB("b", nil), memberDB("c", nil)}},
		{name: "failover mid-roll to a share still on the old version: the replacement share first, the evicted one kept",
			primary:  atEpoch("c", 2),
			placed:   []rollShare{memberDB("a", standby(next, next, true)), memberDB("c", primary(true, 2, old, old, true)), memberDB("d", nil)},
			evicting: []rollShare{silent(memberDB("b", primary(true, 1, old, old, true)))},
			hold:     []string{"b", "c"}, step: "waiting for the share on d to run 16.5"},
		{name: "then the primary switches over again, to a share on the new version",
			primary:  atEpoch("c", 2),
			placed:   []rollShare{memberDB("a", standby(next, next, true)), memberDB("c", primary(true, 2, old, old, true)), memberDB("d", standby(next, next, true))},
			evicting: []rollShare{silent(memberDB("b", primary(true, 1, old, old, true)))},
			hold:     []string{"b", "c"}, to: []string{"a", "d"}, step: "switching the primary over from c"},
		{name: "failover mid-roll to a share already on the new version: the others follow without a switchover",
			primary:  atEpoch("a", 2),
			placed:   []rollShare{memberDB("a", primary(true, 2, next, next, true)), memberDB("c", standby(old, old, true))},
			evicting: []rollShare{silent(memberDB("b", primary(true, 1, old, old, true)))},
			hold:     []string{"b"}, step: "the primary runs 16.5 on a at epoch 2; updating the share on c"},
		{name: "a version without an image, taken back: the one share that got it goes back first",
			want:    &dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: old, Image: "registry.example/postgres:" + old},
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(next, old, false)), memberDB("b", primary(true, 1, old, old, true)), memberDB("c", standby(old, old, true))},
			step:    "the primary runs 16.4 on b at epoch 1; updating the share on a"},
		{name: "a silent primary's cluster holds the standbys: they are the failover's candidates",
			primary: atEpoch("b", 1),
			placed:  []rollShare{memberDB("a", standby(old, old, true)), silent(memberDB("b", primary(true, 1, old, old, true))), memberDB("c", standby(old, old, true))},
			hold:    []string{"a", "b", "c"}, step: "waiting for the primary on b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := want
			if tc.want != nil {
				w = tc.want
			}
			plan := planRoll(w, tc.primary, tc.placed, tc.evicting)
			var hold []string
			for c := range plan.hold {
				hold = append(hold, c)
			}
			slices.Sort(hold)
			if !slices.Equal(hold, tc.hold) {
				t.Errorf("held %v, want %v (step %q)", hold, tc.hold, plan.step)
			}
			if !slices.Equal(plan.switchoverTo, tc.to) {
				t.Errorf("switchover to %v, want %v", plan.switchoverTo, tc.to)
			}
			switch {
			case tc.step == "" && plan.step != "":
				t.Errorf("step %q, want no roll", plan.step)
			case !strings.Contains(plan.step, tc.step):
				t.Errorf("step %q, want it to say %q", plan.step, tc.step)
			}
		})
	}
}

// A held share keeps the version and image it was written with and takes every other change;
// the others get the DatabaseCluster's template as it is.
func TestRollPlanApply(t *testing.T) {
	dbc := newDB(2)
	dbc.Spec.Engine, dbc.Spec.Version, dbc.Spec.Image = dbfleetv1alpha1.EnginePostgres, "16.5", "registry.example/postgres:16.5"
	existing := rollMDB(dbfleetv1alpha1.RolePrimary, 1, "16.4", "16.4", true)
	var plan rollPlan
	plan.keep("b")
	held := *dbc.Spec.DatabaseTemplate.DeepCopy()
	plan.apply(&held, "b", existing)
	if held.Version != "16.4" || held.Image != "registry.example/postgres:16.4" || !held.Storage.Size.Equal(dbc.Spec.Storage.Size) {
		t.Errorf("held share: version %q image %q storage %s, want 16.4, its old image and the current storage", held.Version, held.Image, held.Storage.Size.String())
	}
	other := *dbc.Spec.DatabaseTemplate.DeepCopy()
	plan.apply(&other, "a", existing)
	if other.Version != "16.5" || other.Image != "registry.example/postgres:16.5" {
		t.Errorf("share not held: version %q image %q, want the DatabaseCluster's", other.Version, other.Image)
	}
}
