// Command hub is the dbfleet hub: it places DatabaseClusters across member clusters.
package main

import (
	"os"

	"github.com/dbfleet/dbfleet/cmd/hub/app"
)

func main() {
	if err := app.NewHubCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
