// Package fence keeps the one-primary promise on the member side. The agent may act as the
// holder of a primary only while its hub lease is fresh: renewed successfully within fenceAfter,
// counted from the start of that renewal (so a slow request never stretches it). While fresh, it
// renews a member-local Lease dbfleet-primary-<db> (holder "<cluster>/<epoch>") for each primary
// share, never past that same deadline (its duration is fenceAfter rounded down to whole seconds,
// while what the hub waits on is rounded up); database engines write only while that Lease is
// unexpired and names their epoch, so a crashed agent fences too. Once the deadline passes, the
// agent fences its primaries: their pods are relabelled dbfleet.io/role=fenced and the share is
// marked fenced at its epoch (an annotation on the StatefulSet, so a restart remembers). A fenced
// share stays fenced until the hub hands it a higher epoch.
package fence
