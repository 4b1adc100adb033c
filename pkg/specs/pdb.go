package specs

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// PrimaryPDBName and ReplicaPDBName name the two PodDisruptionBudgets of a database.
func PrimaryPDBName(db string) string { return db + "-primary" }
func ReplicaPDBName(db string) string { return db + "-replica" }

// PDBs are the budgets of a share: voluntary disruptions never take the primary pod (only the
// primary cluster's share gets that budget), and take replicas one at a time.
func PDBs(mdb *dbfleetv1alpha1.MemberDatabase) []*policyv1.PodDisruptionBudget {
	pdb := func(name, role string, spec policyv1.PodDisruptionBudgetSpec) *policyv1.PodDisruptionBudget {
		sel := SelectorLabels(mdb)
		sel[contract.LabelRole] = role
		spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
		return &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: name, Labels: ObjectLabels(mdb)},
			Spec:       spec,
		}
	}
	pdbs := []*policyv1.PodDisruptionBudget{
		pdb(ReplicaPDBName(mdb.Spec.DatabaseRef.Name), contract.PodRoleReplica,
			policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}),
	}
	if mdb.Spec.Role == dbfleetv1alpha1.RolePrimary {
		pdbs = append(pdbs, pdb(PrimaryPDBName(mdb.Spec.DatabaseRef.Name), contract.PodRolePrimary,
			policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}))
	}
	return pdbs
}
