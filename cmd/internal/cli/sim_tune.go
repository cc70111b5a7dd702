package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/sim"
	"github.com/floodgate-io/floodgate/cmd/internal/sim/bounds"
)

// simTuneFlags are the flags of `floodgate sim tune` as typed.
type simTuneFlags struct {
	limit, tolerance, arrival string
	ratePerNode               float64
	nodes, keys, windows      int
	delay, skew               time.Duration
	drift, z, poisson         float64
	strategies                []string
	seed                      uint64
	noConfirm, asJSON         bool
}

// newSimTuneCmd is `floodgate sim tune`, confirming its answers with the
// simulator of package sim.
func newSimTuneCmd() *cobra.Command {
	return newSimTuneCmdWith(func(f simTuneFlags) bounds.Confirm { return simConfirm(f.seed, f.windows) })
}

// newSimTuneCmdWith builds the command with the confirmation it is given
// (a test passes its own; nil confirm: none).
func newSimTuneCmdWith(confirmFor func(simTuneFlags) bounds.Confirm) *cobra.Command {
	var f simTuneFlags
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Choose each strategy's sync interval T from a tolerated overshoot, and confirm it by simulation",
		Long: "tune prints, per strategy, the longest sync interval T (leased: and its lease; sampled: the largest 1/p)\n" +
			"whose worst-case overshoot per window, from the bound the strategy documents, stays within\n" +
			"--tolerance of the limit; the cost of that setting in shared-store calls per second; and the worst\n" +
			"overshoot a simulation of the fleet at that setting measured (uniform Poisson load, one key).\n\n" +
			"The bounds are cluster's doc comments (package cmd/internal/sim/bounds). Arrivals are taken as Poisson of the given\n" +
			"mean, as simulated: the other nodes' arrivals during a stale view are bounded at the --poisson quantile;\n" +
			"--poisson 0 takes the mean as a steady peak rate, the docs' own form. The simulation runs without loss\n" +
			"or jitter and does not model --drift.",
		Example: "  floodgate sim tune --limit 1000/s --nodes 10 --tolerance 5%\n" +
			"  floodgate sim tune --limit 1000/s --nodes 10 --tolerance 5% --arrival 4x --delay 2ms --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, tolerance, err := f.params(cmd.Flags().Changed("rate-per-node"), cmd.Flags().Changed("arrival"))
			if err != nil {
				return err
			}
			var confirm bounds.Confirm
			if !f.noConfirm && confirmFor != nil {
				confirm = confirmFor(f)
			}
			rows, tuneErr := bounds.Tune(cmd.Context(), f.strategies, p, tolerance, f.keys, confirm)
			if rows == nil {
				return tuneErr
			}
			report := simTuneReport{Params: p, Tolerance: tolerance, Keys: f.keys, Arrival: f.arrivalText(p), Rows: rows}
			if f.asJSON {
				err = report.writeJSON(cmd.OutOrStdout())
			} else {
				err = report.writeText(cmd.OutOrStdout())
			}
			return errors.Join(err, tuneErr, report.refuted())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.limit, "limit", "", "the shared limit, N/unit: 1000/s, 60000/m, 500/5s (required)")
	fl.IntVar(&f.nodes, "nodes", 0, "nodes sharing the limit (required)")
	fl.StringVar(&f.tolerance, "tolerance", "", "overshoot tolerated per window, of the limit: 5% or 0.05 (required)")
	fl.StringVar(&f.arrival, "arrival", "2x", "offered load over the fleet, as a multiple of the limit, spread evenly over the nodes")
	fl.Float64Var(&f.ratePerNode, "rate-per-node", 0, "instead of --arrival: each node's arrival rate, units per second")
	fl.DurationVar(&f.delay, "delay", 5*time.Millisecond, "round trip to the shared store (gossip: between nodes)")
	fl.IntVar(&f.keys, "keys", 1, "keys under the limit, each with this load (scales the cost; the simulation runs one)")
	fl.DurationVar(&f.skew, "skew", 0, "largest clock offset of a node")
	fl.Float64Var(&f.drift, "drift", 0, "leased: difference of clock rates, 0.001 is 0.1% (not simulated)")
	fl.Float64Var(&f.poisson, "poisson", 0.999, "arrivals are Poisson (as simulated): bound the other nodes' arrivals at this quantile; 0: a steady rate, the docs' form")
	fl.Float64Var(&f.z, "z", bounds.DefaultZ, "sampled: standard deviations of sampling error the bound allows")
	fl.StringSliceVar(&f.strategies, "strategies", bounds.Strategies(), "strategies to tune")
	fl.Uint64Var(&f.seed, "seed", 1, "the simulation's seed")
	fl.IntVar(&f.windows, "windows", 30, "windows of the limit's period to simulate per strategy")
	fl.BoolVar(&f.noConfirm, "no-confirm", false, "print the analytic answer only, without simulating")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	for _, name := range []string{"limit", "nodes", "tolerance"} {
		_ = cmd.MarkFlagRequired(name) // the names exist: no error
	}
	return cmd
}

// params turns the flags into the bounds' Params and the tolerance.
func (f simTuneFlags) params(perNodeSet, arrivalSet bool) (bounds.Params, float64, error) {
	rate, period, err := parseRate(f.limit)
	if err != nil {
		return bounds.Params{}, 0, err
	}
	tolerance, err := parseTolerance(f.tolerance)
	if err != nil {
		return bounds.Params{}, 0, err
	}
	switch {
	case f.nodes < 1:
		return bounds.Params{}, 0, fmt.Errorf("--nodes must be at least 1, got %d", f.nodes)
	case f.windows < 1:
		return bounds.Params{}, 0, fmt.Errorf("--windows must be at least 1, got %d", f.windows)
	}
	p := bounds.Params{
		Nodes:   f.nodes,
		Limit:   floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
		Delay:   f.delay,
		Z:       f.z,
		Skew:    f.skew,
		Drift:   f.drift,
		Poisson: f.poisson,
		OneIn:   1, // tune picks sampled's own
	}
	if perNodeSet && arrivalSet {
		return bounds.Params{}, 0, errors.New("--arrival and --rate-per-node both given: use one")
	}
	p.ArrivalRate, err = f.perNode(perNodeSet, float64(rate)/period.Seconds())
	return p, tolerance, err
}

// perNode is λ: --rate-per-node, or --arrival's share of the fleet's load.
func (f simTuneFlags) perNode(perNodeSet bool, limitPerSecond float64) (float64, error) {
	if perNodeSet {
		if !(f.ratePerNode > 0) || f.ratePerNode > 1e12 {
			return 0, fmt.Errorf("--rate-per-node must be a positive rate (units per second), got %v", f.ratePerNode)
		}
		return f.ratePerNode, nil
	}
	load, err := parseMultiple(f.arrival)
	if err != nil {
		return 0, err
	}
	return load * limitPerSecond / float64(f.nodes), nil
}

// arrivalText says how λ was chosen, for the report.
func (f simTuneFlags) arrivalText(p bounds.Params) string {
	if f.ratePerNode > 0 {
		return fmt.Sprintf("%.6g/s per node (--rate-per-node)", p.ArrivalRate)
	}
	return fmt.Sprintf("%.6g/s per node (%s the limit, spread evenly)", p.ArrivalRate, f.arrival)
}

// parseTolerance reads "5%" or "0.05".
func parseTolerance(s string) (float64, error) {
	text, percent := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || !(v >= 0) || v > 1e6 {
		return 0, fmt.Errorf("--tolerance %q: want a fraction of the limit ≥ 0, such as 5%% or 0.05", s)
	}
	if percent {
		v /= 100
	}
	return v, nil
}

// parseMultiple reads "2x" (or "2"): a positive multiple of the limit.
func parseMultiple(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "x"), 64)
	if err != nil || !(v > 0) || v > 1e6 {
		return 0, fmt.Errorf("--arrival %q: want a positive multiple of the limit, such as 2x", s)
	}
	return v, nil
}

// simConfirm confirms a setting with a run of the simulator: windows
// periods of uniform Poisson load at the params' arrival rate on one key,
// no loss, no jitter, the given seed.
func simConfirm(seed uint64, windows int) bounds.Confirm {
	return func(ctx context.Context, strategy string, p bounds.Params) (bounds.Measurement, error) {
		cfg := sim.Config{
			Strategy: strategy,
			Nodes:    p.Nodes,
			Interval: p.Interval,
			Limit:    p.Limit,
			Workload: "uniform",
			Load:     p.ArrivalRate * float64(p.Nodes) * p.Limit.Period.Seconds() / float64(p.Limit.Rate),
			Duration: time.Duration(windows) * p.Limit.Period,
			Delay:    p.Delay,
			Skew:     p.Skew,
			Seed:     seed,
			OneIn:    p.OneIn,
		}
		if cfg.Interval == 0 {
			cfg.Interval = p.Limit.Period // the strategy has no T; the simulator wants one
		}
		res, err := sim.Run(ctx, cfg)
		if err != nil {
			return bounds.Measurement{}, err
		}
		return bounds.Measurement{
			Overshoot:           float64(res.OvershootMax),
			StoreCallsPerSecond: float64(res.StoreCalls) / cfg.Duration.Seconds(),
		}, nil
	}
}

// simTuneReport is what tune prints.
type simTuneReport struct {
	Params    bounds.Params    `json:"params"`
	Tolerance float64          `json:"tolerance"`
	Keys      int              `json:"keys"`
	Arrival   string           `json:"arrival"`
	Rows      []bounds.TuneRow `json:"strategies"`
}

// refuted names the rows whose measurement exceeded their tolerance: the
// tuned setting did not hold, and the command must not exit 0.
func (r simTuneReport) refuted() error {
	var over []string
	for _, row := range r.Rows {
		if row.Measured != nil && !row.Confirmed() {
			over = append(over, fmt.Sprintf("%s measured %.0f units over the limit, tolerance %.4g", row.Strategy, row.Measured.Overshoot, row.Tolerance))
		}
	}
	if len(over) == 0 {
		return nil
	}
	return fmt.Errorf("simulation exceeded the tolerance: %s", strings.Join(over, "; "))
}

// writeJSON prints the report as one JSON document.
func (r simTuneReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText prints the report as a table, then each verdict's reason.
func (r simTuneReport) writeText(w io.Writer) error {
	p := r.Params
	fmt.Fprintf(w, "limit %d/%s (fixed window) over %d nodes, arrivals %s, delay %s, keys %d\n",
		p.Limit.Rate, p.Limit.Period, p.Nodes, r.Arrival, p.Delay, r.Keys)
	fmt.Fprintf(w, "tolerance %.4g%% of the limit = %.4g units of overshoot per window\n\n", 100*r.Tolerance, r.Tolerance*float64(p.Limit.Rate))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tT\t1/p\tLEASE\tOVERSHOOT ≤\tUNDERSHOOT ≤\tSTORE CALLS/S\tMEASURED OVERSHOOT\tMEASURED CALLS/S\tCONFIRMED")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Strategy, tuneInterval(row), tuneOneIn(row), tuneLease(row),
			tuneFigure(row, row.Overshoot), tuneFigure(row, row.Undershoot), tuneFigure(row, row.StoreCallsPerSecond), tuneMeasured(row))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%s: %s: %s\n", row.Strategy, row.Verdict, row.Reason)
	}
	_, err := fmt.Fprintln(w, "\nbounds are worst cases per window (cluster's doc comments); calls are over the fleet for all keys.")
	return err
}

// tuneInterval shows T: the longest that fits, the Period shown for a
// strategy that fits at any T, "none", or "-" for a strategy without T.
func tuneInterval(row bounds.TuneRow) string {
	switch {
	case row.Interval != 0 && row.Verdict == bounds.AnyInterval:
		return "any (" + row.IntervalText + ")"
	case row.Interval != 0:
		return row.IntervalText
	case row.Verdict == bounds.NoInterval && (row.Strategy == bounds.Leased || row.Strategy == bounds.Synced):
		return "none"
	}
	return "-"
}

func tuneOneIn(row bounds.TuneRow) string {
	if row.OneIn == 0 {
		return "-"
	}
	return strconv.FormatInt(row.OneIn, 10)
}

func tuneLease(row bounds.TuneRow) string {
	if row.Lease == nil {
		return "-"
	}
	return fmt.Sprintf("%d units/%s", row.Lease.Units, row.Lease.Valid)
}

// tuneFigure prints a bound, or "-" where the row has no setting.
func tuneFigure(row bounds.TuneRow, v float64) string {
	if row.Verdict == bounds.NoInterval && row.Overshoot == 0 && row.StoreCallsPerSecond == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// tuneMeasured prints the measurement's two columns and the verdict.
func tuneMeasured(row bounds.TuneRow) string {
	switch {
	case row.ConfirmError != "":
		return "-\t-\terror: " + row.ConfirmError
	case row.Measured == nil:
		return "-\t-\t-"
	case row.Confirmed():
		return fmt.Sprintf("%.0f\t%.1f\tyes", row.Measured.Overshoot, row.Measured.StoreCallsPerSecond)
	}
	return fmt.Sprintf("%.0f\t%.1f\tNO", row.Measured.Overshoot, row.Measured.StoreCallsPerSecond)
}
