package crds

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/dbfleet/dbfleet/test/framework"
)

// hub is the API server every test in this package talks to.
var hub *framework.Environment

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping CRD integration tests in -short mode")
		os.Exit(0)
	}
	var err error
	hub, err = framework.StartHub()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := hub.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
