// Package cli holds the floodgate command tree (cobra), so that every
// subcommand can be run and tested in process.
package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Main runs the command line args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "floodgate:", err)
		return 1
	}
	return 0
}

// NewRoot builds the floodgate command tree.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "floodgate",
		Short: "Floodgate is a distributed rate limiter: library, service and gateway",
		Example: "  floodgate serve                                   # the service, built-in policy, in memory\n" +
			"  floodgate proxy --upstream http://127.0.0.1:3000 --limit 100/m --by header:X-API-Key\n" +
			"  floodgate config check examples/policies/\n" +
			"  floodgate bench --target grpc --addr 127.0.0.1:8081\n" +
			"  floodgate sim --strategy exact,leased,gossip --nodes 10",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newConfigCmd(), newBenchCmd(), newServeCmd(), newProxyCmd())
	root.AddCommand(newSimCmd())
	return root
}
