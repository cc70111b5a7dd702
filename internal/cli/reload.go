package cli

import "github.com/spf13/pflag"

// reloadFlags say when a reloaded policy may replace the one in force.
type reloadFlags struct{}

func (f *reloadFlags) register(fl *pflag.FlagSet) {}
