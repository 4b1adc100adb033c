package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dbfleet/dbfleet/pkg/instance/pgbackrest"
)

// walArchive is postgres's archive_command, "dbfleet-instance wal-archive %p": it pushes the
// segment with pgBackRest, every option taken from the environment postgres passes on, and
// records the outcome in the file $DBFLEET_ARCHIVE_RECORD for the manager to report (the
// store's error, which postgres's statistics do not keep). It exits non-zero when the push
// failed, so postgres keeps the segment and tries again.
func walArchive(args []string) int {
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: dbfleet-instance wal-archive <WAL file> (archive_command's %%p)\n")
		return 2
	}
	record := os.Getenv(pgbackrest.EnvArchiveRecord)
	if record == "" {
		fmt.Fprintf(os.Stderr, "dbfleet-instance wal-archive: %s is not set\n", pgbackrest.EnvArchiveRecord)
		return 2
	}
	bin := os.Getenv(pgbackrest.EnvBinary)
	if bin == "" {
		bin = "pgbackrest"
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := pgbackrest.FromEnv(bin, os.Getenv).ArchivePush(ctx, args[0], record); err != nil {
		fmt.Fprintln(os.Stderr, "dbfleet-instance wal-archive:", pgbackrest.Summary(err))
		return 1
	}
	return 0
}
