package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/sim"
)

// simFlags are the flags of floodgate sim. The list flags make a sweep:
// one simulation per combination.
type simFlags struct {
	strategies []string
	nodes      []int
	intervals  []time.Duration
	workloads  []string
	loads      []float64
	limit      string
	algorithm  string
	duration   time.Duration
	delay      time.Duration
	jitter     time.Duration
	loss       float64
	skew       time.Duration
	seed       uint64
	oneIn      int64
	clients    int
	timeout    time.Duration
	json, csv  bool
	series     bool
}

// newSimCmd is floodgate sim: the deterministic cluster simulation, and
// the experiments built on it as subcommands.
func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate a fleet sharing one limit, deterministically, on a virtual clock",
		Long: `sim runs the real cluster strategies on N simulated nodes, on a virtual clock
with a simulated network (delay, jitter, loss) and clock skew, and prints,
per run, the overshoot and undershoot against the limit, utilisation,
shared-store calls and fairness. Lists in --strategy, --nodes, --interval,
--workload and --load make a sweep: one run per combination. The same flags
and --seed print the same bytes.

Workloads: uniform, zipf (load-balancer skew across nodes), sticky (heavy
clients pinned to nodes), shift (traffic moves to the other half of the
nodes halfway), bursts, skew (uniform, needs --skew), churn (a node dies at
1/3 of the run and another joins at 2/3).`,
		Example: `  floodgate sim --strategy synced,leased,gossip --nodes 10 --interval 50ms,100ms,200ms
  floodgate sim --strategy local,leased --workload zipf --json
  floodgate sim tune --limit 1000/s --nodes 10 --tolerance 5%`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.strategies, "strategy", []string{"synced"}, "strategies: exact, local, leased, synced, sampled, gossip (comma-separated for a sweep)")
	fl.IntSliceVar(&f.nodes, "nodes", []int{10}, "fleet sizes N")
	fl.DurationSliceVar(&f.intervals, "interval", []time.Duration{100 * time.Millisecond}, "sync intervals T")
	fl.StringSliceVar(&f.workloads, "workload", []string{"uniform"}, "arrival patterns: uniform, zipf, sticky, shift, bursts, skew, churn")
	fl.Float64SliceVar(&f.loads, "load", []float64{2}, "offered rate as multiples of the limit")
	fl.StringVar(&f.limit, "limit", "1000/s", "the global limit, N/unit: 1000/s, 100/m, 500/5s")
	fl.StringVar(&f.algorithm, "algorithm", string(floodgate.FixedWindow), "how the limit counts (leased and gossip: fixed_window only)")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "simulated time")
	fl.DurationVar(&f.delay, "delay", 5*time.Millisecond, "network round trip to the store and between nodes")
	fl.DurationVar(&f.jitter, "jitter", time.Millisecond, "uniform extra delay, up to this, on each one-way trip")
	fl.Float64Var(&f.loss, "loss", 0, "probability that one message is lost, in [0, 1)")
	fl.DurationVar(&f.skew, "skew", 0, "node clock offsets, spread evenly over [-skew, +skew]")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of every random choice")
	fl.Int64Var(&f.oneIn, "one-in", sim.DefaultOneIn, "sampled: push one admitted request in this many")
	fl.IntVar(&f.clients, "clients", sim.DefaultClients, "distinct clients sending")
	fl.DurationVar(&f.timeout, "timeout", sim.DefaultTimeout, "store call timeout: a lost call fails after it")
	fl.BoolVar(&f.json, "json", false, "print JSON, per-window series included")
	fl.BoolVar(&f.csv, "csv", false, "print CSV, one record per run")
	fl.BoolVar(&f.series, "series", false, "print the per-window series as CSV (admitted over time)")
	cmd.MarkFlagsMutuallyExclusive("json", "csv", "series")
	cmd.AddCommand(newSimTuneCmd(), newSimAccuracyCmd(), newSimBoundaryCmd(), newSimPlotsCmd())
	return cmd
}

// runSim runs the sweep and prints it.
func runSim(cmd *cobra.Command, f simFlags) error {
	configs, err := f.configs()
	if err != nil {
		return err
	}
	results := make([]sim.Result, 0, len(configs))
	for _, c := range configs {
		r, err := sim.Run(cmd.Context(), c)
		if err != nil {
			return fmt.Errorf("sim %s on %d nodes, T=%s, %s: %w", c.Strategy, c.Nodes, c.Interval, c.Workload, err)
		}
		results = append(results, r)
	}
	return writeSim(cmd.OutOrStdout(), f, results)
}

// writeSim prints the results in the format the flags ask for.
func writeSim(w io.Writer, f simFlags, results []sim.Result) error {
	switch {
	case f.json:
		return sim.WriteJSON(w, results)
	case f.csv:
		return sim.WriteCSV(w, results)
	case f.series:
		return sim.WriteWindowsCSV(w, results)
	}
	return sim.WriteTable(w, results)
}

// simMaxRuns bounds a sweep, so that a long list typed by mistake fails at
// once.
const simMaxRuns = 10_000

// configs expands the list flags into one Config per combination, in the
// order strategy, workload, nodes, interval, load.
func (f simFlags) configs() ([]sim.Config, error) {
	rate, period, err := parseRate(f.limit)
	if err != nil {
		return nil, err
	}
	for name, n := range map[string]int{"--strategy": len(f.strategies), "--nodes": len(f.nodes),
		"--interval": len(f.intervals), "--workload": len(f.workloads), "--load": len(f.loads)} {
		if n == 0 {
			return nil, fmt.Errorf("%s: give at least one value", name)
		}
	}
	runs := len(f.strategies) * len(f.nodes) * len(f.intervals) * len(f.workloads) * len(f.loads)
	if runs > simMaxRuns {
		return nil, fmt.Errorf("the sweep has %d runs, more than %d", runs, simMaxRuns)
	}
	limit := floodgate.Limit{Algorithm: floodgate.Algorithm(f.algorithm), Rate: rate, Period: period}
	var out []sim.Config
	for _, strategy := range f.strategies {
		for _, workload := range f.workloads {
			for _, n := range f.nodes {
				for _, interval := range f.intervals {
					for _, load := range f.loads {
						out = append(out, sim.Config{Strategy: strategy, Nodes: n, Interval: interval, Limit: limit,
							Workload: workload, Load: load, Duration: f.duration, Delay: f.delay, Jitter: f.jitter,
							Loss: f.loss, Skew: f.skew, Seed: f.seed, OneIn: f.oneIn, Timeout: f.timeout,
							Clients: f.clients})
					}
				}
			}
		}
	}
	return out, nil
}
