package databasecluster

import (
	"testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// The primary endpoint the other shares follow: the primary share's report at the current epoch;
// before that report, in the PodIP mode, the promoted pod's own address if its instance runs.
func TestReplicationPrimaryEndpoint(t *testing.T) {
	instance := func(pod string, role dbfleetv1alpha1.InstanceRole) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: pod, Role: role, Address: "10.0.0.7:5432"}
	}
	memberDB := func(role dbfleetv1alpha1.ReplicaRole, epoch int64, network dbfleetv1alpha1.DatabaseNetwork, rw string, in ...dbfleetv1alpha1.InstanceStatus) *dbfleetv1alpha1.MemberDatabase {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		mdb.Spec.Role, mdb.Spec.Network = role, network
		mdb.Status.Epoch, mdb.Status.Instances = epoch, in
		if rw != "" {
			mdb.Status.Endpoints = &dbfleetv1alpha1.DatabaseEndpoints{ReadWrite: rw}
		}
		return mdb
	}
	for _, tc := range []struct {
		name  string
		share *dbfleetv1alpha1.MemberDatabase
		want  string
	}{
		{"reported at the epoch", memberDB(dbfleetv1alpha1.RolePrimary, 3, "", "10.0.0.9:5432", instance("orders-1", dbfleetv1alpha1.InstanceRunningPrimary)), "10.0.0.9:5432"},
		{"promoted in this reconcile: the share is still a standby's", memberDB(dbfleetv1alpha1.RoleReplica, 2, "", "", instance("orders-1", dbfleetv1alpha1.InstanceRunningStandby)), "10.0.0.7:5432"},
		{"an older epoch's report is not used", memberDB(dbfleetv1alpha1.RolePrimary, 2, dbfleetv1alpha1.DatabaseNetworkPodIP, "10.0.0.9:5432", instance("orders-1", dbfleetv1alpha1.InstanceRunningStandby)), "10.0.0.7:5432"},
		{"another pod of the share runs", memberDB(dbfleetv1alpha1.RoleReplica, 2, "", "", instance("orders-2", dbfleetv1alpha1.InstanceRunningStandby)), ""},
		{"the promoted pod does not run", memberDB(dbfleetv1alpha1.RolePrimary, 3, "", "", instance("orders-1", dbfleetv1alpha1.InstanceStopped)), ""},
		{"a load balancer exists only once it is primary", memberDB(dbfleetv1alpha1.RoleReplica, 2, dbfleetv1alpha1.DatabaseNetworkLoadBalancer, "", instance("orders-1", dbfleetv1alpha1.InstanceRunningStandby)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := &dbfleetv1alpha1.DatabaseCluster{}
			dbc.Name = "orders"
			dbc.Spec.Engine = dbfleetv1alpha1.EnginePostgres
			dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "west", Pod: "orders-1", Epoch: 3}
			s := &scope{dbc: dbc, memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{"west": tc.share}}
			if got := replicationOf(s).primaryEndpoint; got != tc.want {
				t.Errorf("primary endpoint %q, want %q", got, tc.want)
			}
		})
	}
}
