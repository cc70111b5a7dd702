package cli

import "github.com/spf13/pflag"

// listenFlags are the listeners' timeouts and the drain on SIGTERM.
type listenFlags struct{}

// register adds the flags; proxy is true for floodgate proxy, whose
// defaults differ where it streams an upstream's bodies.
func (f *listenFlags) register(fl *pflag.FlagSet, proxy bool) {}
