// Package pgsql is the SQL the instance manager runs against its own postgres (roles, slots,
// status, the write that proves readiness) and the replication-protocol question it asks a
// primary (IDENTIFY_SYSTEM), through pgx.
package pgsql
