// Package hubtoken keeps the agent's hub credential fresh. `hub join` hands the agent a
// short-lived token of its ServiceAccount on the hub (member-<cluster>/dbfleet-agent); before half
// of its life is over the agent asks the hub's TokenRequest API for a new one (its hub Role may
// do that for its own ServiceAccount only), uses it from then on, and writes it back into the
// member Secret its kubeconfig came from, so that a restarted agent starts with the newest token.
// A stolen token is good for one lifetime at most; a re-join revokes them all (it replaces the
// ServiceAccount).
package hubtoken
