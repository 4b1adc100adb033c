// Package install checks dbfleet installed the way docs/install.md says, on a local federation
// with real nodes (make test-install, part of make test).
//
// TestMain builds hub and localfed from the checkout and brings up `localfed up --hub-node
// --no-dbfleet` in a state directory of its own: the hub cluster and two members (east, west),
// each with a real node (kubelet, containerd, runc), the hub's node holding the hub image
// (bin/images/hub.tar), the members' the agent and postgres images, and nothing of dbfleet
// running. It tears the federation down with `localfed down` when the suite ends (also on an
// interrupt, or just before `go test` would kill it at its -timeout) and then checks that no
// mount under its state directory, no bridge of its network and no iptables rule of its own is
// left.
//
// TestHelmInstall then installs dbfleet as a user would, and breaks it:
//
//   - `helm install` of deploy/charts/dbfleet-hub into the hub cluster: two replicas with leader
//     election, the image from the node (image.tag=dev, image.pullPolicy=Never: no registry);
//   - `hub join --output-format helm-values` and `helm install` of deploy/charts/dbfleet-agent
//     into each member, the agent a pod there that reaches the hub API server on the hub
//     node's bridge address;
//   - a 2-replica postgres placed on both members and Available;
//   - the leader's container (the leader-election Lease's holder) killed with SIGKILL through
//     its node's containerd: the other replica takes the Lease, reconciles, and nothing moves —
//     the primary's cluster, pod and epoch, every MemberDatabase's generation and epoch and
//     every member StatefulSet's generation stay as they were, and no state ever shows two
//     primaries;
//   - `helm upgrade --reuse-values --set image.tag=...` to a hub image rebuilt with another
//     version label (hack/images --tag, imported into the node): the new pods run the new
//     image, a new pod leads, and again nothing of the database moves.
//
// Figures (the takeover and the rollout) are logged, not asserted; run with -v to see them.
package install
