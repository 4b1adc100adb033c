package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// rollAgents stand in for the agents of a database's shares during a version roll: on every look
// they report each share in done as its agent would once its pods run the share's current spec
// (observed generation and epoch, ready, Available, status.version its spec's version). A share
// left out of done is one whose rollout has not finished: it reports nothing new.
type rollAgents struct {
	f    *fixture
	name string
	done map[string]bool
	// check, when set, is what must hold of the shares at every look; it says what does not.
	check func(map[string]*dbfleetv1alpha1.MemberDatabase) string
}

// report brings the finished shares' reports up to date and returns the MemberDatabases by
// cluster as they are then.
func (a *rollAgents) report() map[string]*dbfleetv1alpha1.MemberDatabase {
	a.f.t.Helper()
	mdbs := a.f.memberDatabases(a.name)
	for cluster, mdb := range mdbs {
		st := mdb.Status
		if !a.done[cluster] || st.ObservedGeneration == mdb.Generation && st.Epoch == mdb.Spec.Epoch && st.Version == mdb.Spec.Database.Version {
			continue
		}
		// The hub may write the spec meanwhile: report on the fresh object.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh := &dbfleetv1alpha1.MemberDatabase{}
			if err := a.f.c.Get(a.f.ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
				return err
			}
			setAgentStatus(fresh, fresh.Spec.Replicas, true)
			return a.f.c.Status().Update(a.f.ctx, fresh)
		})
		if err != nil {
			a.f.t.Fatal(err)
		}
	}
	return a.f.memberDatabases(a.name)
}

// wait reports as the agents until cond holds of the shares and the database.
func (a *rollAgents) wait(what string, cond func(map[string]*dbfleetv1alpha1.MemberDatabase, *dbfleetv1alpha1.DatabaseCluster) bool) (map[string]*dbfleetv1alpha1.MemberDatabase, *dbfleetv1alpha1.DatabaseCluster) {
	a.f.t.Helper()
	var mdbs map[string]*dbfleetv1alpha1.MemberDatabase
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	broken := ""
	err := framework.WaitFor(a.f.ctx, framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		mdbs = a.report()
		if a.check != nil {
			if broken = a.check(mdbs); broken != "" {
				return true, nil
			}
		}
		if err := a.f.c.Get(ctx, client.ObjectKey{Namespace: a.f.ns, Name: a.name}, dbc); err != nil {
			return false, err
		}
		return cond(mdbs, dbc), nil
	})
	if broken != "" {
		a.f.t.Fatalf("while waiting for %s: %s\nshares: %s", what, broken, versions(mdbs))
	}
	if err != nil {
		a.f.t.Fatalf("%v\nshares: %s\nlast status: %s", err, versions(mdbs), describe(dbc))
	}
	return mdbs, dbc
}

// versions says what each share is asked to run and reports, e.g. "a=16.5/16.4(primary@1)".
func versions(mdbs map[string]*dbfleetv1alpha1.MemberDatabase) string {
	var parts []string
	for _, cluster := range sortedKeys(mdbs) {
		m := mdbs[cluster]
		parts = append(parts, fmt.Sprintf("%s=%s/%s(%s@%d)", cluster, m.Spec.Database.Version, m.Status.Version, m.Spec.Role, m.Spec.Epoch))
	}
	return strings.Join(parts, " ")
}

func rollingVersion(d *dbfleetv1alpha1.DatabaseCluster, part string) bool {
	c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionProgressing)
	return hasCondition(d, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingVersion) && strings.Contains(c.Message, part)
}

// threeShares places database "orders" (3 replicas, app=orders) on new clusters a, b and c under
// the policy that policy makes, and returns it with agents that report every share finished.
func threeShares(f *fixture, policy func()) (*dbfleetv1alpha1.DatabaseCluster, *rollAgents) {
	f.t.Helper()
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	f.member("c", "r3", 100)
	policy()
	f.database("orders", 3, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on three clusters", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 3 })
	f.waitMemberDatabases("orders", shares(dbc))
	agents := &rollAgents{f: f, name: "orders", done: map[string]bool{}}
	for _, p := range dbc.Status.Placements {
		agents.done[p.Cluster] = true
	}
	return dbc, agents
}

// A minor version change of a postgres database on three clusters goes to the standbys' shares
// first, one at a time, each only once the one before runs the new version; the primary's share
// keeps the old version through the switchover that hands the primary to a share on the new
// version, and is updated only once the new primary is Available at its new epoch. The primary
// stays where the roll put it, and the status, condition and Events say what happened.
func TestMinorVersionRollsStandbysFirstThenSwitchesOverThenUpdatesTheOldPrimary(t *testing.T) {
	const old, next = "16.4", "16.5"
	f := newFixture(t)
	startHub(t)
	dbc, agents := threeShares(f, func() { f.policy("spread", 0, map[string]string{"app": "orders"}, divided()) })
	agents.wait("available on "+old+" everywhere", func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		for _, p := range d.Status.Placements {
			if p.Version != old {
				return false
			}
		}
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "") &&
			hasCondition(d, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, dbfleetv1alpha1.ReasonUpToDate)
	})
	primary := dbc.Status.Primary.Cluster
	var standbys []string
	for _, p := range dbc.Status.Placements {
		if p.Cluster != primary {
			standbys = append(standbys, p.Cluster)
		}
	}
	slices.Sort(standbys)

	// Throughout: never more than one share between versions (asked for one, running another).
	oneAtATime := func(m map[string]*dbfleetv1alpha1.MemberDatabase) string {
		var updating []string
		for _, cluster := range sortedKeys(m) {
			if m[cluster].Spec.Database.Version != m[cluster].Status.Version {
				updating = append(updating, cluster)
			}
		}
		if len(updating) > 1 {
			return fmt.Sprintf("shares %v are updated at the same time", updating)
		}
		return ""
	}
	agents.check = func(m map[string]*dbfleetv1alpha1.MemberDatabase) string {
		if msg := oneAtATime(m); msg != "" {
			return msg
		}
		if v := m[primary].Spec.Database.Version; v != old {
			return fmt.Sprintf("the primary's share on %s asked for %s before the switchover", primary, v)
		}
		return ""
	}
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Version = next })

	// 1. The standbys' shares, one at a time.
	for i, standby := range standbys {
		agents.done[standby] = false // its pods are being replaced
		mdbs, _ := agents.wait(fmt.Sprintf("the share on %s (standby %d of %d) asked for %s, the hub waiting for it", standby, i+1, len(standbys), next),
			func(m map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
				return m[standby].Spec.Database.Version == next && rollingVersion(d, "waiting for the share on "+standby)
			})
		for _, other := range standbys[i+1:] {
			if v := mdbs[other].Spec.Database.Version; v != old {
				t.Fatalf("standby share on %s asked for %s while %s had not finished: %s", other, v, standby, versions(mdbs))
			}
		}
		if m := mdbs[primary]; m.Spec.Database.Version != old || m.Spec.Role != dbfleetv1alpha1.RolePrimary {
			t.Fatalf("the primary's share on %s changed while the standbys roll: %s", primary, versions(mdbs))
		}
		agents.done[standby] = true // its pods run the new version
	}

	// 2. The switchover, the primary's share still on the old version. The old primary's agent
	// confirms its demotion only when told to, and the standbys' agents then stop reporting, so
	// that the new primary's first report at epoch 2 comes when the test says.
	agents.done[primary] = false
	mdbs, d := agents.wait("the old primary told to step down", func(m map[string]*dbfleetv1alpha1.MemberDatabase, _ *dbfleetv1alpha1.DatabaseCluster) bool {
		return m[primary].Spec.Role == dbfleetv1alpha1.RoleReplica && m[primary].Spec.Epoch == 2
	})
	if m := mdbs[primary]; m.Spec.Database.Version != old || d.Status.Primary.Cluster != primary {
		t.Fatalf("the primary's share on %s while it steps down: %s; primary %+v", primary, versions(mdbs), d.Status.Primary)
	}
	f.waitEvent("orders", dbfleetv1alpha1.ReasonRollingVersion, "switching the primary over from "+primary)
	for _, standby := range standbys {
		agents.done[standby] = false
	}
	agents.done[primary] = true
	mdbs, d = agents.wait("a standby promoted", func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster != primary
	})
	newPrimary := d.Status.Primary.Cluster
	if !slices.Contains(standbys, newPrimary) || d.Status.Primary.Epoch != 2 {
		t.Fatalf("primary %+v after the switchover, want one of %v at epoch 2", d.Status.Primary, standbys)
	}
	if m := mdbs[primary]; m.Spec.Database.Version != old || m.Spec.Role != dbfleetv1alpha1.RoleReplica {
		t.Fatalf("the former primary's share on %s: %s", primary, versions(mdbs))
	}
	f.waitEvent("orders", "PrimaryChanged", primary, newPrimary)

	// 3. The former primary's share waits for the new primary to take writes at epoch 2.
	agents.check = oneAtATime
	agents.wait("the former primary's share held until the new primary is Available", func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return rollingVersion(d, fmt.Sprintf("waiting for the primary on %s to be Available at epoch 2 before updating the share on %s", newPrimary, primary))
	})
	if m := f.memberDatabases("orders")[primary]; m.Spec.Database.Version != old {
		t.Fatalf("the former primary's share on %s asked for %s before the new primary was Available", primary, m.Spec.Database.Version)
	}
	for _, standby := range standbys {
		agents.done[standby] = true
	}
	agents.done[primary] = false
	agents.wait("the former primary's share asked for "+next, func(m map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return m[primary].Spec.Database.Version == next && rollingVersion(d, "waiting for the share on "+primary)
	})
	agents.done[primary] = true
	_, d = agents.wait("the roll over", func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		for _, p := range d.Status.Placements {
			if p.Version != next {
				return false
			}
		}
		return hasCondition(d, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, dbfleetv1alpha1.ReasonUpToDate)
	})
	if p := d.Status.Primary; p.Cluster != newPrimary || p.Epoch != 2 {
		t.Errorf("primary %+v after the roll, want it to stay on %s at epoch 2", p, newPrimary)
	}
	f.waitEvent("orders", "VersionRolled", next, newPrimary)
	for _, standby := range standbys {
		f.waitEvent("orders", dbfleetv1alpha1.ReasonRollingVersion, "updating the share on "+standby)
	}
	f.waitEvent("orders", dbfleetv1alpha1.ReasonRollingVersion, "updating the share on "+primary)
}

// A hub that restarts mid-roll picks the roll up from what the shares report: the share it had
// asked for the new version is waited for, the next is updated once it runs it.
func TestVersionRollResumesAfterAHubRestart(t *testing.T) {
	const old, next = "16.4", "16.5"
	f := newFixture(t)
	stop := startHub(t)
	dbc, agents := threeShares(f, func() { f.policy("spread", 0, map[string]string{"app": "orders"}, divided()) })
	agents.wait("available", func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	primary := dbc.Status.Primary.Cluster
	var standbys []string
	for _, p := range dbc.Status.Placements {
		if p.Cluster != primary {
			standbys = append(standbys, p.Cluster)
		}
	}
	slices.Sort(standbys)
	first, second := standbys[0], standbys[1]

	agents.done[first] = false
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Version = next })
	agents.wait("the first standby's share asked for "+next, func(m map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return m[first].Spec.Database.Version == next && rollingVersion(d, "waiting for the share on "+first)
	})
	stop()

	// The first share finishes while no hub runs; a new hub takes the roll on from there.
	agents.done[first], agents.done[second] = true, false
	agents.report()
	startHub(t)
	mdbs, _ := agents.wait("the second standby's share asked for "+next, func(m map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return m[second].Spec.Database.Version == next && rollingVersion(d, "waiting for the share on "+second)
	})
	if m := mdbs[primary]; m.Spec.Database.Version != old || m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 1 {
		t.Fatalf("the primary's share after the restart: %s", versions(mdbs))
	}
}

// A failover in the middle of a roll: the primary's cluster is lost while the first standby's
// share is being updated, and the failover promotes the share still on the old version (it has
// come furthest in the WAL). The roll goes on from what is there: the share being updated
// finishes, the primary is switched over again to it (with the promotion token of a planned
// move), the share that was promoted is updated last, and the lost primary's evicted share keeps
// the old version.
func TestAFailoverDuringAVersionRollIsFollowedByASwitchoverToTheNewVersion(t *testing.T) {
	const old, next = "16.4", "16.5"
	f := newFixture(t)
	startHub(t)
	dbc, agents := threeShares(f, func() { failoverPolicy(f, 1) })
	primary := dbc.Status.Primary.Cluster
	var standbys []string
	for _, p := range dbc.Status.Placements {
		if p.Cluster != primary {
			standbys = append(standbys, p.Cluster)
		}
	}
	slices.Sort(standbys)
	updating, behind := standbys[0], standbys[1]
	mdbs := f.memberDatabases("orders")
	// behind has received more WAL than updating: a failover promotes it.
	f.reportInstances(mdbs[primary], dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, primary), Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: true,
		ReceivedLSN: "0/5000000", ReplayedLSN: "0/5000000"})
	f.reportInstances(mdbs[behind], dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, behind), Role: dbfleetv1alpha1.InstanceRunningStandby, Ready: true,
		ReceivedLSN: "0/5000000", ReplayedLSN: "0/5000000"})
	f.reportInstances(mdbs[updating], dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, updating), Role: dbfleetv1alpha1.InstanceRunningStandby, Ready: true,
		ReceivedLSN: "0/3000000", ReplayedLSN: "0/3000000"})
	agents.wait("available on "+old, func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})

	agents.done[updating] = false
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Version = next })
	agents.wait("the first standby's share asked for "+next, func(m map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return m[updating].Spec.Database.Version == next && rollingVersion(d, "waiting for the share on "+updating)
	})

	// The primary's cluster is lost; the share still on the old version takes the primary.
	agents.done[primary] = false
	f.loseCluster(primary, 1)
	mdbs, d := agents.wait("failed over to "+behind, func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == behind && len(d.Status.Evictions) == 1
	})
	if v := mdbs[behind].Spec.Database.Version; v != old || d.Status.Primary.Epoch != 2 {
		t.Fatalf("after the failover: primary %+v, its share asked for %s; want %s at epoch 2 on %s", d.Status.Primary, v, behind, old)
	}

	// The updated share finishes; the primary is switched over to it, the promoted share
	// keeping the old version meanwhile.
	agents.done[updating] = true
	agents.check = func(m map[string]*dbfleetv1alpha1.MemberDatabase) string {
		if v := m[behind].Spec.Database.Version; v != old {
			return fmt.Sprintf("the failed-over primary's share on %s asked for %s before the switchover", behind, v)
		}
		if e := m[primary]; e != nil && e.Spec.Database.Version != old { // until it is purged
			return fmt.Sprintf("the lost primary's evicted share on %s asked for %s", primary, e.Spec.Database.Version)
		}
		return ""
	}
	agents.done[behind] = false // its agent confirms the demotion when the test says
	mdbs, _ = agents.wait("the failed-over primary told to step down", func(m map[string]*dbfleetv1alpha1.MemberDatabase, _ *dbfleetv1alpha1.DatabaseCluster) bool {
		return m[behind].Spec.Role == dbfleetv1alpha1.RoleReplica && m[behind].Spec.Epoch == 3
	})
	const final = "0/5000100"
	f.reportInstances(mdbs[behind], dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, behind), Role: dbfleetv1alpha1.InstanceFenced,
		Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: 2, FinalLSN: final, Timeline: 2}})
	// The target's agent reports its promotion when the test says.
	agents.done[updating], agents.done[behind] = false, true
	_, d = agents.wait("switched over to "+updating, func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == updating
	})
	if p := d.Status.Primary; p.Epoch != 3 || p.PromoteAfterLSN != final {
		t.Errorf("primary %+v, want %s at epoch 3 promoted after %s", p, updating, final)
	}
	agents.wait("the failed-over primary's share held until the new primary is Available", func(_ map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		return rollingVersion(d, fmt.Sprintf("waiting for the primary on %s to be Available at epoch 3 before updating the share on %s", updating, behind))
	})
	agents.done[updating] = true

	// Then the share that was promoted by the failover.
	agents.check = func(m map[string]*dbfleetv1alpha1.MemberDatabase) string {
		if e := m[primary]; e != nil && e.Spec.Database.Version != old { // until it is purged
			return fmt.Sprintf("the lost primary's evicted share on %s asked for %s", primary, e.Spec.Database.Version)
		}
		return ""
	}
	_, d = agents.wait("every placed share on "+next, func(m map[string]*dbfleetv1alpha1.MemberDatabase, d *dbfleetv1alpha1.DatabaseCluster) bool {
		for _, p := range d.Status.Placements {
			if p.Version != next {
				return false
			}
		}
		return m[behind].Spec.Database.Version == next && !rollingVersion(d, "")
	})
	if p := d.Status.Primary; p.Cluster != updating || p.Epoch != 3 {
		t.Errorf("primary %+v after the roll, want it to stay on %s at epoch 3", p, updating)
	}
	f.waitEvent("orders", "VersionRolled", next, updating)
}
