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
		Use:           "floodgate",
		Short:         "Floodgate is a distributed rate limiter: library, service and gateway",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newConfigCmd(), newBenchCmd(), newServeCmd(), newProxyCmd())
	root.AddCommand(newSimCmd())
	return root
}
