package specs

import (
	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Labels the agent sets on what it creates in a member cluster.
const (
	// LabelManagedBy marks objects the agent created; it acts on nothing without it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByAgent is LabelManagedBy's value.
	ManagedByAgent = "dbfleet-agent"
	// LabelInstance is the standard instance label, the DatabaseCluster name.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelName is the standard name label, the engine.
	LabelName = "app.kubernetes.io/name"
)

// SelectorLabels select the pods of one database in a member cluster.
func SelectorLabels(mdb *dbfleetv1alpha1.MemberDatabase) map[string]string {
	return map[string]string{
		dbfleetv1alpha1.LabelDatabase: mdb.Spec.DatabaseRef.Name,
		LabelInstance:                 mdb.Spec.DatabaseRef.Name,
	}
}

// ObjectLabels are set on every object the agent creates for a database.
func ObjectLabels(mdb *dbfleetv1alpha1.MemberDatabase) map[string]string {
	l := SelectorLabels(mdb)
	l[LabelManagedBy] = ManagedByAgent
	l[LabelName] = string(mdb.Spec.Database.Engine)
	return l
}
