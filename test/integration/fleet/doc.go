// Package fleet runs the real binaries end to end on two API servers: `hub join` mints the
// agent's credentials, its manifests are applied to the member, `agent` runs with exactly those
// credentials (hub token from join, member ServiceAccount from the manifests), and `hub run`
// places a DatabaseCluster that the agent turns into a StatefulSet. Then the agent is killed and
// the hub notices.
package fleet
