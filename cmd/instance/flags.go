package main

import "flag"

// flagSet holds the Go flags (zap's) that pflag adopts.
func flagSet() *flag.FlagSet { return flag.NewFlagSet("zap", flag.ContinueOnError) }
