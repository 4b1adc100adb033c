// Package procfs reads the processes of this host from /proc: their pids, and each one's name,
// state and parent from /proc/<pid>/stat. The instance manager reaps orphans by it, and the
// local federation and the end-to-end suite find the processes they kill.
package procfs
