// Package postgres runs the PostgreSQL server binaries for the instance manager: postgres itself
// as a supervised child (fast and immediate shutdown), initdb, pg_basebackup, pg_ctl promote and
// pg_controldata, each as the user postgres runs as.
package postgres
