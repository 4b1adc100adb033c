// Package pgbackrest drives pgBackRest (Debian's 2.45, in the postgres image) for the instance
// manager: a repository in an S3 object store described by Repo, and the commands that create
// its stanza, archive WAL, take backups, read what the repository holds and restore.
//
// Every option goes to pgBackRest by its environment (PGBACKREST_*), never on a command line or
// in a file: the store's keys stay out of the process list and off the data volume, and
// postgres, started with the same environment, runs archive_command = ArchiveCommand with
// nothing more to know. Restore writes restore_command the same way, with no options on it.
package pgbackrest
