package pgsql

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestSCRAMVerifierMatchesPostgreSQL: a verifier PostgreSQL 15 stored for password "secret"
// (SELECT rolpassword FROM pg_authid, after ALTER ROLE ... PASSWORD 'secret') is the one this
// code computes from the same salt.
func TestSCRAMVerifierMatchesPostgreSQL(t *testing.T) {
	const stored = postgresVerifier
	parts := strings.Split(strings.TrimPrefix(stored, "SCRAM-SHA-256$"), "$")
	salt, err := base64.StdEncoding.DecodeString(strings.Split(parts[0], ":")[1])
	if err != nil {
		t.Fatal(err)
	}
	got, err := scramVerifier("secret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got != stored {
		t.Errorf("verifier\n%s, PostgreSQL's\n%s", got, stored)
	}
}

func TestPasswordFormHidesPrintableASCII(t *testing.T) {
	form, err := passwordForm("Xk3pq9zzRT")
	if err != nil || !strings.HasPrefix(form, "SCRAM-SHA-256$4096:") || strings.Contains(form, "Xk3pq9zzRT") {
		t.Errorf("passwordForm = %q, %v; want a SCRAM verifier", form, err)
	}
	if again, _ := passwordForm("Xk3pq9zzRT"); again == form {
		t.Error("two verifiers of one password share their salt")
	}
	if form, _ := passwordForm("ünïcode"); form != "ünïcode" {
		t.Errorf("passwordForm of a non-ASCII password = %q, want it as it is (the server applies SASLprep)", form)
	}
}

// postgresVerifier is what PostgreSQL 15.x stored for CREATE ROLE v LOGIN PASSWORD 'secret'
// (read back from pg_authid on this machine's Debian PostgreSQL 15).
const postgresVerifier = "SCRAM-SHA-256$4096:bNzfJ+wwURVW6phbXXV+XA==$FbpDAMyjp92Jw/oQo5bDfByQZP5j6xM4PFkgA9OQlHY=:gwrwZg+9k2JqZGLyA5PFwhTuprbT+9486oNl5Q+6Pt4="
