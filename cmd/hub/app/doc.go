// Package app builds the hub's command line: one cobra command per subcommand, each a thin layer
// of flags and wiring over the packages under pkg/hub.
package app
