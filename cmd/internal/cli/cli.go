// Package cli holds the floodgate command tree (cobra), so that every
// subcommand can be run and tested in process.
package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/floodgate-io/floodgate/cmd/internal/cli.Version=v1.2.3".
// When empty, the module version from the build info is used.
var Version = ""

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

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the Floodgate version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "floodgate %s\n", buildVersion())
			return err
		},
	}
}

func buildVersion() string {
	if Version != "" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return fmt.Sprintf("%s (%s)", v, info.GoVersion)
}
