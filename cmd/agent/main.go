// Command agent is the dbfleet member agent: it runs its cluster's share of each DatabaseCluster.
package main

import (
	"os"

	"github.com/dbfleet/dbfleet/cmd/agent/app"
)

func main() {
	if err := app.NewAgentCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
