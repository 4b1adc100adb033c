package join

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfleet/dbfleet/test/framework"
)

var (
	// hub is the API server every test in this package joins clusters to.
	hub *framework.Environment
	// adminKubeconfig is a kubeconfig file for a hub admin, as a user would pass to `hub join`.
	adminKubeconfig string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping join integration tests in -short mode")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	hub, err = framework.StartHub()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := hub.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	dir, err := os.MkdirTemp("", "dbfleet-join-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kc, err := hub.Kubeconfig("admin", "system:masters")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	adminKubeconfig = filepath.Join(dir, "hub-admin.kubeconfig")
	if err := os.WriteFile(adminKubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
