// Package specs holds the pure builders of the objects the agent applies in a member cluster for
// one share (one MemberDatabase), and the names and labels those objects carry. It has no client
// and does no I/O: the agent's reconciler (pkg/agent/member, which the hub's Push mode runs too)
// applies what these functions return and finds the objects again by the names they define.
//
// One file per kind of object:
//   - labels.go: the labels on every object the agent creates (ObjectLabels, with LabelManagedBy,
//     without which the agent touches nothing) and on the pods it selects (SelectorLabels);
//   - engine.go: what the agent knows of each engine: its image and its port;
//   - statefulset.go: the share's StatefulSet, with its epoch and the epoch it was fenced at;
//   - instancemanager.go: the same StatefulSet running dbfleet-instance as the database
//     container's PID 1 (postgres with the agent's --instance-image);
//   - storage.go: the StatefulSet's data claim template and the claims it names;
//   - services.go: the headless Service, a postgres share's client Services <db>-rw and <db>-ro,
//     and the LoadBalancer in front of its primary;
//   - pdb.go: the PodDisruptionBudgets;
//   - rbac.go: the instance managers' ServiceAccount, Role and RoleBinding;
//   - secrets.go: the credentials Secrets, from the copies the hub carried;
//   - pods.go: what the agent writes on the pods the StatefulSet makes: each pod's role label
//     (PodRole, at PrimaryOrdinal) and the annotations its instance manager reads;
//   - objects.go: every object of a share by name, for its removal.
//
// Each builder is a function of the MemberDatabase and of what the agent read (the carried
// Secrets, the pods), so every pass, in Pull or Push mode, asks for the same objects.
package specs
