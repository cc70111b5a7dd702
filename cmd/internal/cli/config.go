package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "config",
		Short:   "Work with policy configuration files",
		Example: "  floodgate config check examples/policies/ examples/policy.yaml",
	}
	var (
		merge bool
		fleet assemble.FleetConfig
	)
	check := &cobra.Command{
		Use:   "check PATH...",
		Short: "Validate policy files or directories; exit non-zero on any error",
		Long: "Loads every file (or every *.yaml / *.yml in each directory) as the service would,\n" +
			"prints each domain with its number of limits, and reports every error with its file and line.\n" +
			"Paths that hold no policy file at all (an empty directory) are an error, as they are for serve and proxy.\n" +
			"With --strategy (and --sample-one-in), as given to serve, a limit that strategy cannot serve\n" +
			"(leased and gossip serve fixed_window only) is an error too, as it is when serve starts or reloads.",
		Example: "  floodgate config check examples/policies/\n" +
			"  floodgate config check --strategy leased examples/policies/fleet.yaml   # as serve --strategy leased would\n" +
			"  floodgate config check --merge-domains /etc/ratelimit/config/          # envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			set, err := config.ReadFiles(paths...).ParseWith(config.Options{MergeDomains: merge})
			if err != nil {
				return err
			}
			if err := assemble.CheckStrategies(fleet, set); err != nil {
				return err
			}
			for _, domain := range set.Domains() {
				p, _ := set.Policy(domain)
				fmt.Fprintf(cmd.OutOrStdout(), "ok  %s  domain %q: %d limits\n", p.File, domain, len(p.Rules()))
			}
			return nil
		},
	}
	registerMerge(check.Flags(), &merge)
	registerStrategy(check.Flags(), &fleet)
	cmd.AddCommand(check)
	return cmd
}
