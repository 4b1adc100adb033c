// Command dbfleet-instance is the instance manager of a dbfleet PostgreSQL pod: PID 1 of the
// postgres container, running postgres as its child (see package instance).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dbfleet/dbfleet/pkg/instance"
)

func main() {
	if len(os.Args) == 2 && strings.HasPrefix(os.Args[1], copyFlag) {
		if err := copySelf(strings.TrimPrefix(os.Args[1], copyFlag)); err != nil {
			fmt.Fprintln(os.Stderr, "dbfleet-instance:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "wal-archive" {
		os.Exit(walArchive(os.Args[2:]))
	}
	opts := instance.Options{}
	zapOpts := zap.Options{}
	fs := pflag.NewFlagSet("dbfleet-instance", pflag.ExitOnError)
	opts.AddFlags(fs)
	gofs := flagSet()
	zapOpts.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
	_ = fs.Parse(os.Args[1:])
	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)

	m, err := instance.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbfleet-instance:", err)
		os.Exit(2)
	}
	// SIGTERM and SIGINT: fast shutdown with a clean checkpoint, then exit.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = ctrl.LoggerInto(ctx, log)
	// SIGHUP: postgres re-reads its configuration.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for sig := range hup {
			m.Forward(sig)
		}
	}()
	if err := m.Run(ctx); err != nil {
		log.Error(err, "Instance manager failed")
		os.Exit(1)
	}
}
