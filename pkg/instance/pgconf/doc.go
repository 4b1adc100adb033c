// Package pgconf writes the files of a data directory that the instance manager owns: the
// dbfleet.conf include (server settings), dbfleet-standby.conf (primary_conninfo and the slot),
// pg_hba.conf (SCRAM from any address), standby.signal, and the manager's own state file.
package pgconf
