package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate/cmd/internal/experiments"
)

// The plots the two commands write into --plot DIR.
const (
	accuracyPlotFile = "sliding-accuracy.png"
	boundaryPlotFile = "boundary-burst.png"
	skewPlotFile     = "clock-skew.png"
)

// newSimAccuracyCmd measures the sliding window counter against the exact
// sliding log on a synthetic heavy-tailed trace.
func newSimAccuracyCmd() *cobra.Command {
	var (
		cfg          experiments.AccuracyConfig
		sweep        bool
		asJSON, cvs  bool
		plotDir      string
		shapeDefault = experiments.Shape{TailIndex: 1.5, DutyCycle: 0.2, Load: 0.01}
	)
	cmd := &cobra.Command{
		Use:   "accuracy",
		Short: "Measure how often the sliding window counter decides differently from the exact sliding log",
		Long: "Generates a seeded synthetic trace (heavy-tailed per-source rates, bursty on/off sources) and decides\n" +
			"every request with the sliding window counter and with the exact sliding log. Reports the share of\n" +
			"requests wrongly allowed and wrongly denied, judged two ways: replay (the log keeps its own state) and\n" +
			"shadow (the exact rule on what the counter admitted). With --sweep, one row per traffic shape.",
		Example: "  floodgate sim accuracy --requests 10000000 --sources 100000 --seed 1\n" +
			"  floodgate sim accuracy --requests 200000 --sources 2000 --sweep=false --load 0.1 --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := plotsDrawable(plotDir); err != nil {
				return err
			}
			shapes := []experiments.Shape{cfg.Shape}
			if sweep {
				shapes = experiments.ShapeSweep(cfg.Shape)
			}
			results, err := experiments.AccuracySweep(cmd.Context(), cfg, shapes)
			if err != nil {
				return err
			}
			if plotDir != "" {
				if err := writeAccuracyPlot(cmd, cfg, plotDir); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				return writeExperimentJSON(out, results)
			case cvs:
				return experiments.WriteAccuracyCSV(out, results)
			}
			fmt.Fprintf(out, "sliding window counter vs exact sliding log: limit %d per %s per source, seed %d\n",
				cfg.Rate, cfg.Period, cfg.Seed)
			return experiments.WriteAccuracyText(out, results)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Requests, "requests", 10_000_000, "requests in the trace")
	f.IntVar(&cfg.Sources, "sources", 100_000, "distinct sources (keys)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed: the same seed gives the same trace and figures")
	f.Int64Var(&cfg.Rate, "rate", 100, "each source's limit: requests per --period")
	f.DurationVar(&cfg.Period, "period", time.Minute, "the limit's period")
	f.Float64Var(&cfg.Shape.TailIndex, "tail-index", shapeDefault.TailIndex, "Pareto index of the sources' rates (smaller: heavier tail)")
	f.Float64Var(&cfg.Shape.DutyCycle, "duty-cycle", shapeDefault.DutyCycle, "share of time a source is on, in (0, 1] (1: steady)")
	f.Float64Var(&cfg.Shape.Load, "load", shapeDefault.Load, "median source's rate / limit")
	f.BoolVar(&sweep, "sweep", true, "also vary the tail index, duty cycle and load one at a time")
	f.IntVar(&cfg.Workers, "workers", 0, "sources decided in parallel (0: GOMAXPROCS); does not change the result")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.BoolVar(&cvs, "csv", false, "print the results as CSV")
	f.StringVar(&plotDir, "plot", "", "also write "+accuracyPlotFile+" (disagreement vs load, per tail index) into this directory")
	cmd.MarkFlagsMutuallyExclusive("json", "csv")
	return cmd
}

// writeAccuracyPlot runs the grid of tail indexes × loads the plot needs,
// at the command's size, and draws it.
func writeAccuracyPlot(cmd *cobra.Command, cfg experiments.AccuracyConfig, dir string) error {
	var shapes []experiments.Shape
	for _, a := range []float64{1.2, 1.5, 2, 3} {
		for _, l := range []float64{0.001, 0.003, 0.01, 0.03} {
			shapes = append(shapes, experiments.Shape{TailIndex: a, DutyCycle: cfg.Shape.DutyCycle, Load: l})
		}
	}
	grid, err := experiments.AccuracySweep(cmd.Context(), cfg, shapes)
	if err != nil {
		return err
	}
	return writeExperimentPlot(experiments.AccuracyChart(grid), dir, accuracyPlotFile)
}

// newSimBoundaryCmd shows the fixed window's burst across a boundary and
// what clock skew between nodes does to windows.
func newSimBoundaryCmd() *cobra.Command {
	var (
		boundary    experiments.BoundaryConfig
		skew        experiments.SkewConfig
		asJSON, cvs bool
		plotDir     string
	)
	cmd := &cobra.Command{
		Use:   "boundary",
		Short: "Show the fixed window's 2× burst across a window boundary and the effect of clock skew between nodes",
		Long: "Part 1: one client sends --rate requests in the --width before a window boundary and --rate more in the\n" +
			"--width after it; prints the most each algorithm admitted in any interval of one period.\n" +
			"Part 2: --nodes nodes each enforce rate/nodes on their own clock, spread over each of --skews; a bursty\n" +
			"trace is balanced round-robin over them; prints the most admitted in one true window per algorithm and skew.",
		Example: "  floodgate sim boundary\n" +
			"  floodgate sim boundary --nodes 10 --skews 0s,100ms,500ms --plot docs/img",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := plotsDrawable(plotDir); err != nil {
				return err
			}
			skew.Rate, skew.Period = boundary.Rate, boundary.Period
			b, err := experiments.BoundaryBurst(boundary)
			if err != nil {
				return err
			}
			s, err := experiments.ClockSkew(skew)
			if err != nil {
				return err
			}
			if plotDir != "" {
				if err := writeExperimentPlot(experiments.BoundaryChart(b), plotDir, boundaryPlotFile); err != nil {
					return err
				}
				if err := writeExperimentPlot(experiments.SkewChart(s), plotDir, skewPlotFile); err != nil {
					return err
				}
			}
			return writeBoundaryReport(cmd.OutOrStdout(), b, s, asJSON, cvs)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&boundary.Rate, "rate", 100, "the limit: requests per --period (with --nodes, the global limit)")
	f.DurationVar(&boundary.Period, "period", time.Second, "the limit's period")
	f.DurationVar(&boundary.Width, "width", 100*time.Millisecond, "how long each of the two bursts lasts")
	f.IntVar(&boundary.Samples, "samples", 601, "points on the admitted-over-time curve (for --plot and --json)")
	f.IntVar(&skew.Nodes, "nodes", 10, "nodes sharing the limit, each enforcing rate/nodes")
	f.DurationSliceVar(&skew.Skews, "skews", []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond},
		"spreads of the nodes' clocks to measure")
	f.IntVar(&skew.Periods, "periods", 2000, "length of the skew trace, in periods")
	f.Uint64Var(&skew.Seed, "seed", 1, "random seed of the skew trace")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.BoolVar(&cvs, "csv", false, "print the results as CSV (two tables, a blank line between)")
	f.StringVar(&plotDir, "plot", "", "also write "+boundaryPlotFile+" and "+skewPlotFile+" into this directory")
	cmd.MarkFlagsMutuallyExclusive("json", "csv")
	return cmd
}

func writeBoundaryReport(out io.Writer, b experiments.BoundaryResult, s experiments.SkewResult, asJSON, cvs bool) error {
	switch {
	case asJSON:
		return writeExperimentJSON(out, struct {
			Boundary experiments.BoundaryResult `json:"boundary"`
			Skew     experiments.SkewResult     `json:"skew"`
		}{b, s})
	case cvs:
		if err := experiments.WriteBoundaryCSV(out, b); err != nil {
			return err
		}
		fmt.Fprintln(out)
		return experiments.WriteSkewCSV(out, s)
	}
	if err := experiments.WriteBoundaryText(out, b); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return experiments.WriteSkewText(out, s)
}

// plotsDrawable fails a command asked to draw into dir (--plot) when this
// build cannot draw, before it computes anything.
func plotsDrawable(dir string) error {
	if dir == "" {
		return nil
	}
	if err := experiments.Drawable(); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

func writeExperimentPlot(c experiments.Chart, dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return c.WritePNG(filepath.Join(dir, name))
}

func writeExperimentJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
