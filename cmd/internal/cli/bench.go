package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate/cmd/internal/loadgen"
)

// flagNames maps loadgen's config fields to the flags that set them, so a
// bad value is reported under the name the user typed.
var flagNames = map[string]string{
	"Target": "--target", "Addr": "--addr", "Concurrency": "--concurrency", "Conns": "--conns",
	"Duration": "--duration", "Requests": "--requests", "Rate": "--rate", "Keys": "--keys",
	"Domain": "--domain", "DescriptorKey": "--descriptor-key", "Limit": "--limit", "Cost": "--cost",
	"Timeout": "--timeout",
}

func newBenchCmd() *cobra.Command {
	var (
		cfg     loadgen.Config
		target  string
		asJSON  bool
		callLog string
		gcFloor gcFloorFlag
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a rate-limit service over gRPC (ShouldRateLimit), HTTP (/v1/allow) or gubernator's GetRateLimits and report calls/s and latency",
		Long: "Loads a rate-limit service and prints calls/s, allowed and denied, and latency percentiles.\n" +
			"By default each call asks the policy for domain \"example\", descriptor user=0..999: the per-user\n" +
			"limit of serve's built-in policy. When no call was denied, bench asks the service once more\n" +
			"whether any limit matched, and warns when none did: such a run measures lookups that count nothing.",
		Example: "  floodgate bench                                          # serve's built-in policy on 127.0.0.1:8081\n" +
			"  floodgate bench --target grpc --addr 127.0.0.1:8081 --concurrency 64 --duration 10s\n" +
			"  floodgate bench --target http --addr 127.0.0.1:8080 --limit token_bucket:1000/1s --rate 5000\n" +
			"  floodgate bench --target gubernator --addr 127.0.0.1:1051 --limit token_bucket:1000000/1m --concurrency 64",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			cfg.Target = loadgen.Target(target)
			if callLog != "" {
				f, err := os.Create(callLog)
				if err != nil {
					return fmt.Errorf("--call-log: %w", err)
				}
				defer func() {
					if cerr := f.Close(); cerr != nil && err == nil {
						err = fmt.Errorf("--call-log: %w", cerr)
					}
				}()
				cfg.CallLog = f
			}
			defer gcFloor.start(slog.New(slog.DiscardHandler))()
			report, err := loadgen.Run(cmd.Context(), cfg)
			var cfgErr *loadgen.ConfigError
			if errors.As(err, &cfgErr) {
				return fmt.Errorf("%s: %w", flagNames[cfgErr.Field], cfgErr.Err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				err = report.WriteJSON(cmd.OutOrStdout())
			} else {
				err = report.WriteText(cmd.OutOrStdout())
			}
			if err == nil && report.Errors > 0 {
				err = fmt.Errorf("%d of %d calls failed; first: %s", report.Errors, report.Calls, report.FirstError)
			}
			if err == nil && report.Denied == 0 {
				warnUnmatched(cmd, cfg)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "target", string(loadgen.TargetGRPC), "grpc (ShouldRateLimit), http (POST /v1/allow) or gubernator (its GetRateLimits over gRPC: name --domain, unique_key descriptor-key:N)")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8081", "the service's address (host:port, or a base URL for http)")
	f.IntVar(&cfg.Concurrency, "concurrency", loadgen.DefaultConcurrency, "concurrent callers")
	f.IntVar(&cfg.Conns, "conns", loadgen.DefaultConns, "gRPC connections to spread the callers over")
	f.DurationVar(&cfg.Duration, "duration", loadgen.DefaultDuration, "how long to run")
	f.Int64Var(&cfg.Requests, "requests", 0, "stop after this many calls (0: no cap)")
	f.Float64Var(&cfg.Rate, "rate", 0, "open loop: calls per second to send (0: as fast as the callers go)")
	f.IntVar(&cfg.Keys, "keys", loadgen.DefaultKeys, "distinct keys (descriptor values) to spread calls over")
	f.StringVar(&cfg.Domain, "domain", loadgen.DefaultDomain, "policy domain (the default is the built-in policy's)")
	f.StringVar(&cfg.DescriptorKey, "descriptor-key", loadgen.DefaultDescriptorKey, "descriptor entry key")
	f.StringVar(&cfg.Limit, "limit", "", "http: send this explicit limit (algorithm:rate/period[:burst=N]) instead of a policy lookup; gubernator: required, token_bucket (no burst) or leaky_bucket")
	f.Int64Var(&cfg.Cost, "cost", loadgen.DefaultCost, "cost (hits) per call")
	f.DurationVar(&cfg.Timeout, "timeout", loadgen.DefaultTimeout, "per-call timeout")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&callLog, "call-log", "", fmt.Sprintf("write every call to this file once the run ends, in the order they started: start (Unix ns), latency (ns), outcome; "+
		"shows when the slow calls happened (held in memory until the end, at most %d calls)", loadgen.MaxCallLog))
	gcFloor.registerFor(f, "the load generator's own collections stop all its callers at once, "+
		"which it would report as the service's latency")
	return cmd
}

// warnUnmatched warns, on stderr, when the run's policy lookup matched no
// limit in the service: every call was allowed because nothing counted it.
func warnUnmatched(cmd *cobra.Command, cfg loadgen.Config) {
	matched, err := loadgen.Matched(cmd.Context(), cfg)
	switch {
	case err != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: every call was allowed, and asking whether a limit matched failed: %v\n", err)
	case !matched:
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: no limit matched: the service has no limit for domain %q, descriptor %s=N, "+
			"so every call was allowed without being counted; give the --domain and --descriptor-key of a limit in its policy\n",
			orDefault(cfg.Domain, loadgen.DefaultDomain), orDefault(cfg.DescriptorKey, loadgen.DefaultDescriptorKey))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
