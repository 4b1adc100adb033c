package instance

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dbfleet/dbfleet/pkg/instance/postgres"
	"github.com/dbfleet/dbfleet/test/framework"
)

var (
	member *framework.Environment
	// binary is the dbfleet-instance built from this checkout.
	binary string
	// pgBin holds the PostgreSQL server binaries.
	pgBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping instance integration tests in -short mode")
		os.Exit(0)
	}
	if os.Getenv("DBFLEET_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if pgBin, err = postgres.FindBinDir(os.Getenv("DBFLEET_TEST_PG_BIN")); err != nil {
		fmt.Fprintln(os.Stderr, "PostgreSQL server binaries are needed (apt-get install postgresql):", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "dbfleet-instance-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// postgres's user runs it too, as archive_command.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary = filepath.Join(dir, "dbfleet-instance")
	build := exec.Command("go", "build", "-o", binary, "./cmd/instance")
	build.Dir = framework.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/instance: %v\n%s", err, out)
		return 1
	}
	if member, err = framework.StartMember("east"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := member.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}
