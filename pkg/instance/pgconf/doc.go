// Package pgconf writes the files of a data directory that the instance manager owns: the
// dbfleet.conf include (server settings), dbfleet-standby.conf (primary_conninfo and the slot),
// pg_hba.conf (TLS and SCRAM from the network), standby.signal, the manager's own state file,
// and, beside the data directory, the replication password file and the TLS files.
package pgconf
