package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/experiments"
	"github.com/floodgate-io/floodgate/cmd/internal/sim"
	"github.com/floodgate-io/floodgate/cmd/internal/sim/bounds"
)

// simPlotFlags are the flags of floodgate sim plots.
type simPlotFlags struct {
	out      string
	seed     uint64
	duration time.Duration
}

// newSimPlotsCmd is floodgate sim plots: the simulations behind the
// cluster strategies' plots, drawn as PNGs, with their figures printed as
// Markdown tables.
func newSimPlotsCmd() *cobra.Command {
	var f simPlotFlags
	cmd := &cobra.Command{
		Use:     "plots",
		Example: "  go run -tags plots ./cmd/floodgate sim plots --out docs/img",
		Short:   "Draw the strategies' trade-offs: overshoot vs T, utilisation vs skew, a demand shift",
		Long: `plots runs the simulations behind three plots and writes them to --out:

  overshoot-vs-t.png    worst overshoot per window against the sync interval T,
                        per strategy, with synced's stated bound dashed
  utilisation-vs-skew.png  share of the usable quota admitted as the load
                        balancer's skew grows (zipf exponent), per strategy
  demand-shift.png      admitted per window around the moment traffic moves
                        from one half of the nodes to the other

10 nodes share 1000/s (fixed window); 5ms round trips with 1ms jitter. It
prints the figures of each plot as Markdown tables. The same --seed draws
the same pictures. Drawing needs a floodgate built with -tags plots
(go run -tags plots ./cmd/floodgate sim plots), which links gonum's plot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := experiments.Drawable(); err != nil {
				return err
			}
			return runSimPlots(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "docs/img", "directory for the PNGs")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of every random choice")
	fl.DurationVar(&f.duration, "duration", 20*time.Second, "simulated time of each run")
	return cmd
}

// plotBase is the fleet of every plot.
func plotBase(f simPlotFlags) sim.Config {
	return sim.Config{
		Nodes: 10, Interval: 100 * time.Millisecond, Workload: "uniform", Load: 2, Duration: f.duration,
		Delay: 5 * time.Millisecond, Jitter: time.Millisecond, Seed: f.seed,
		Limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Second},
	}
}

func runSimPlots(ctx context.Context, w io.Writer, f simPlotFlags) error {
	if f.duration < time.Second {
		return fmt.Errorf("--duration %s: want at least one period (1s)", f.duration)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", f.out, err)
	}
	for _, plot := range []func(context.Context, io.Writer, simPlotFlags) error{overshootVsT, utilisationVsSkew, demandShift} {
		if err := plot(ctx, w, f); err != nil {
			return err
		}
	}
	return nil
}

// overshootVsT: the trade-off of T, per strategy, with synced's bound.
func overshootVsT(ctx context.Context, w io.Writer, f simPlotFlags) error {
	intervals := []time.Duration{10, 25, 50, 100, 200, 400}
	strategies := []string{"exact", "local", "leased", "synced", "sampled", "gossip"}
	fmt.Fprintf(w, "\n### Worst overshoot per window (R = 1000) against T\n\n| T | %s | synced bound | leased calls/s | synced calls/s |\n|---|%s---|---|---|\n",
		strings.Join(strategies, " | "), strings.Repeat("---|", len(strategies)))
	series := make([]experiments.Series, len(strategies))
	bound := experiments.Series{Name: "synced: stated bound", Dashed: true}
	for i, s := range strategies {
		series[i].Name = s
	}
	for _, ms := range intervals {
		t := ms * time.Millisecond
		row := make([]sim.Result, len(strategies))
		for i, s := range strategies {
			c := plotBase(f)
			c.Strategy, c.Interval = s, t
			r, err := sim.Run(ctx, c)
			if err != nil {
				return fmt.Errorf("%s at T=%s: %w", s, t, err)
			}
			row[i] = r
			series[i].X = append(series[i].X, float64(ms))
			series[i].Y = append(series[i].Y, float64(r.OvershootMax))
		}
		c := plotBase(f)
		b, err := bounds.Overshoot("synced", bounds.Params{Nodes: c.Nodes, Interval: t, Limit: c.Limit,
			ArrivalRate: c.Load * float64(c.Limit.Rate) / float64(c.Nodes), Delay: c.Delay + 2*c.Jitter})
		if err != nil {
			return err
		}
		bound.X, bound.Y = append(bound.X, float64(ms)), append(bound.Y, b)
		fmt.Fprintf(w, "| %s |", t)
		for _, r := range row {
			fmt.Fprintf(w, " %d |", r.OvershootMax)
		}
		fmt.Fprintf(w, " %.0f | %.1f | %.1f |\n", b, row[2].SharedPerSecond, row[3].SharedPerSecond)
	}
	return experiments.Chart{
		Title:  "Overshoot vs sync interval (10 nodes, 1000/s, load 2x)",
		XLabel: "T (ms)", YLabel: "worst overshoot per window (requests)", LogX: true,
		Series: append(series, bound),
	}.WritePNG(filepath.Join(f.out, "overshoot-vs-t.png"))
}

// utilisationVsSkew: how much of the quota each strategy uses when the
// load balancer favours some nodes, with the fleet offered exactly R.
func utilisationVsSkew(ctx context.Context, w io.Writer, f simPlotFlags) error {
	exponents := []float64{1.01, 1.25, 1.5, 2, 3}
	strategies := []string{"exact", "local", "leased", "synced", "gossip"}
	fmt.Fprintf(w, "\n### Utilisation (admitted / min(offered, R)) against the load balancer's skew (zipf exponent), load 1x\n\n| zipf s | %s |\n|---|%s\n",
		strings.Join(strategies, " | "), strings.Repeat("---|", len(strategies)))
	series := make([]experiments.Series, len(strategies))
	for i, s := range strategies {
		series[i].Name = s
	}
	for _, e := range exponents {
		fmt.Fprintf(w, "| %.2f |", e)
		for i, s := range strategies {
			c := plotBase(f)
			c.Strategy, c.Workload, c.Load, c.Params.ZipfS = s, "zipf", 1, e
			r, err := sim.Run(ctx, c)
			if err != nil {
				return fmt.Errorf("%s at zipf %.2f: %w", s, e, err)
			}
			series[i].X, series[i].Y = append(series[i].X, e), append(series[i].Y, r.Utilisation)
			fmt.Fprintf(w, " %.3f |", r.Utilisation)
		}
		fmt.Fprintln(w)
	}
	return experiments.Chart{
		Title:  "Utilisation vs load-balancer skew (10 nodes, offered = limit)",
		XLabel: "zipf exponent s (node k gets a share ∝ (1+k)^−s)", YLabel: "utilisation",
		Series: series,
	}.WritePNG(filepath.Join(f.out, "utilisation-vs-skew.png"))
}

// demandShift: admitted per window as traffic moves from one half of the
// nodes to the other halfway through.
func demandShift(ctx context.Context, w io.Writer, f simPlotFlags) error {
	strategies := []string{"exact", "local", "leased", "synced", "gossip"}
	fmt.Fprintf(w, "\n### Admitted per window around a demand shift (at %s, load 1.2x, T = 250ms; R = 1000)\n\n| strategy | before (mean) | the window of the shift | after (mean) |\n|---|---|---|---|\n", f.duration/2+500*time.Millisecond)
	var series []experiments.Series
	for _, s := range strategies {
		c := plotBase(f)
		// Offered a little above the limit, T = 250ms, and the shift in the
		// middle of a window, so that the window it falls in shows how fast
		// each strategy follows the demand.
		c.Strategy, c.Workload, c.Load, c.Interval = s, "shift", 1.2, 250*time.Millisecond
		c.Params.ShiftAt = f.duration/2 + 500*time.Millisecond
		r, err := sim.Run(ctx, c)
		if err != nil {
			return fmt.Errorf("%s on a demand shift: %w", s, err)
		}
		sr := experiments.Series{Name: s}
		shift := int(f.duration / time.Second / 2)
		var before, after float64
		for i, win := range r.Windows {
			sr.X = append(sr.X, float64(win.Start)/1e6)
			sr.Y = append(sr.Y, float64(win.Admitted))
			switch {
			case i < shift:
				before += float64(win.Admitted) / float64(shift)
			case i > shift:
				after += float64(win.Admitted) / float64(len(r.Windows)-shift-1)
			}
		}
		first := int64(0)
		if shift < len(r.Windows) {
			first = r.Windows[shift].Admitted
		}
		fmt.Fprintf(w, "| %s | %.0f | %d | %.0f |\n", s, before, first, after)
		series = append(series, sr)
	}
	limit := experiments.Series{Name: "limit", Dashed: true, X: []float64{0, f.duration.Seconds()}, Y: []float64{1000, 1000}}
	return experiments.Chart{
		Title:  fmt.Sprintf("Admitted per window; at %s traffic moves to the other half of the nodes", f.duration/2+500*time.Millisecond),
		XLabel: "time (s)", YLabel: "admitted per 1s window",
		Series: append(series, limit),
	}.WritePNG(filepath.Join(f.out, "demand-shift.png"))
}
