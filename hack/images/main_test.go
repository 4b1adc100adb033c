package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPostgresImageContents: the postgres image has what a pod of it runs on (the server
// programs where the official image has them, their shared libraries and the dynamic loader,
// the entrypoint's shell and tools, uid 999 named postgres) and the PATH and PGDATA the agent's
// pods rely on.
func TestPostgresImageContents(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the PostgreSQL packages and runs ldd on each program")
	}
	if _, err := os.Stat(filepath.Join(pgLib, "bin", "postgres")); err != nil {
		t.Skipf("this machine has no PostgreSQL %s packages: %v", pgMajor, err)
	}
	l, cfg, err := postgresImage("", buildMeta{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		pgLib + "/bin/postgres", pgLib + "/bin/initdb", pgLib + "/bin/pg_ctl", pgLib + "/bin/pg_basebackup",
		pgLib + "/bin/pg_controldata", pgLib + "/bin/pg_isready", pgLib + "/bin/psql",
		pgShare + "/postgres.bki", "/usr/share/zoneinfo/UTC",
		"/bin/sh", "/usr/bin/setpriv", "/usr/local/bin/docker-entrypoint.sh", "/etc/passwd", "/var/lib/postgresql/data",
		pgbackrest,
	}
	libs, err := lddClosure([]string{pgLib + "/bin/postgres", "/bin/sh", pgbackrest})
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		t.Fatal("ldd found no libraries of postgres")
	}
	want = append(want, libs...)
	for _, p := range want {
		if e, ok := l.Lookup(p); !ok || e.Link != "" {
			t.Errorf("the image has no %s", p)
		}
	}
	if l.Has(pgLib + "/lib/llvmjit.so") {
		t.Errorf("the image carries the LLVM JIT, whose libraries it leaves out")
	}
	if !slices.Contains(cfg.Env, "PGDATA=/var/lib/postgresql/data") || !slices.ContainsFunc(cfg.Env, func(e string) bool {
		return strings.HasPrefix(e, "PATH=") && strings.HasSuffix(e, ":"+pgLib+"/bin")
	}) {
		t.Errorf("env %v, want PGDATA and a PATH ending in %s/bin", cfg.Env, pgLib)
	}
	if strings.Join(cfg.Entrypoint, " ") != "/usr/local/bin/docker-entrypoint.sh" || strings.Join(cfg.Cmd, " ") != "postgres" {
		t.Errorf("entrypoint %v cmd %v", cfg.Entrypoint, cfg.Cmd)
	}
}
