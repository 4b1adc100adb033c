package databasecluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// databaseRefIndex indexes MemberDatabases by the "<namespace>/<name>" of their DatabaseCluster,
// across every member namespace.
const databaseRefIndex = "spec.databaseRef"

func databaseRefKey(namespace, name string) string { return namespace + "/" + name }

func indexDatabaseRef(obj client.Object) []string {
	mdb, ok := obj.(*dbfleetv1alpha1.MemberDatabase)
	if !ok {
		return nil
	}
	return []string{databaseRefKey(mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name)}
}

// memberDatabasesOf lists the MemberDatabases of one DatabaseCluster in every member namespace.
func memberDatabasesOf(ctx context.Context, c client.Reader, dbc *dbfleetv1alpha1.DatabaseCluster) ([]dbfleetv1alpha1.MemberDatabase, error) {
	list := &dbfleetv1alpha1.MemberDatabaseList{}
	if err := c.List(ctx, list, client.MatchingFields{databaseRefIndex: databaseRefKey(dbc.Namespace, dbc.Name)}); err != nil {
		return nil, err
	}
	return list.Items, nil
}
