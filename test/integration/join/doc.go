// Package join runs `hub join` and `hub unjoin` against a real kube-apiserver and checks what the
// credential they mint can and cannot do, that re-joining rotates it, that unjoining revokes it,
// and that the agent manifests apply to a member cluster's API server.
package join
