package experiments

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// WriteAccuracyText writes results as an aligned table: one row per shape,
// percentages of all requests.
func WriteAccuracyText(w io.Writer, results []AccuracyResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tail α\tduty\tload\tperiods\trequests\tsources\tover limit %\treplay: wrongly allowed %\twrongly denied %\tshadow: wrongly allowed %\twrongly denied %\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%g\t%g\t%g\t%.0f\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t\n",
			r.Shape.TailIndex, r.Shape.DutyCycle, r.Shape.Load, float64(r.Span)/float64(r.Period), r.Requests, r.Sources,
			r.Pct(r.Requests-r.LogAllowed), r.Pct(r.Replay.WronglyAllowed), r.Pct(r.Replay.WronglyDenied),
			r.Pct(r.Shadow.WronglyAllowed), r.Pct(r.Shadow.WronglyDenied))
	}
	return tw.Flush()
}

// WriteAccuracyCSV writes results as CSV with a header row; counts, not
// percentages, so nothing is lost to rounding.
func WriteAccuracyCSV(w io.Writer, results []AccuracyResult) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"tail_index", "duty_cycle", "load", "requests", "sources", "rate", "period", "span", "seed",
		"counter_allowed", "log_allowed", "replay_wrongly_allowed", "replay_wrongly_denied",
		"shadow_wrongly_allowed", "shadow_wrongly_denied"})
	for _, r := range results {
		_ = cw.Write([]string{f(r.Shape.TailIndex), f(r.Shape.DutyCycle), f(r.Shape.Load), i(r.Requests), i(int64(r.Sources)),
			i(r.Rate), r.Period.String(), r.Span.String(), strconv.FormatUint(r.Seed, 10),
			i(r.CounterAllowed), i(r.LogAllowed), i(r.Replay.WronglyAllowed), i(r.Replay.WronglyDenied),
			i(r.Shadow.WronglyAllowed), i(r.Shadow.WronglyDenied)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteBoundaryText writes the boundary burst table.
func WriteBoundaryText(w io.Writer, r BoundaryResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "limit %d per %s; %d requests in the %s before a window boundary and %d in the %s after\n",
		r.Rate, r.Period, r.Rate, r.Width, r.Rate, r.Width)
	fmt.Fprintln(tw, "algorithm\tadmitted\tmax in any period\t× limit\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t\n", row.Algorithm, row.Admitted, row.MaxInPeriod, float64(row.MaxInPeriod)/float64(r.Rate))
	}
	return tw.Flush()
}

// WriteBoundaryCSV writes the boundary burst rows as CSV.
func WriteBoundaryCSV(w io.Writer, r BoundaryResult) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"algorithm", "rate", "period", "width", "admitted", "max_in_period"})
	for _, row := range r.Rows {
		_ = cw.Write([]string{row.Algorithm, i(r.Rate), r.Period.String(), r.Width.String(), i(row.Admitted), i(row.MaxInPeriod)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteSkewText writes the clock skew table, counts relative to the limit.
func WriteSkewText(w io.Writer, r SkewResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%d nodes, each enforcing %d per %s (global limit %d); counts in true windows\n",
		r.Nodes, r.Rate/int64(r.Nodes), r.Period, r.Rate)
	fmt.Fprintln(tw, "algorithm\tskew\tmax/window\tp99/window\twindows over %\tmax in any period\tadmitted %\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%d\t%.1f\t\n", row.Algorithm, row.Skew, row.MaxWindow, row.P99Window,
			100*row.OverShare, row.MaxPeriod, 100*float64(row.Admitted)/float64(row.Requests))
	}
	return tw.Flush()
}

// WriteSkewCSV writes the clock skew rows as CSV.
func WriteSkewCSV(w io.Writer, r SkewResult) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"algorithm", "nodes", "rate", "period", "skew", "max_window", "p99_window", "over_share", "max_period", "admitted", "requests"})
	for _, row := range r.Rows {
		_ = cw.Write([]string{row.Algorithm, i(int64(r.Nodes)), i(r.Rate), r.Period.String(), row.Skew.String(),
			i(row.MaxWindow), i(row.P99Window), f(row.OverShare), i(row.MaxPeriod), i(row.Admitted), i(row.Requests)})
	}
	cw.Flush()
	return cw.Error()
}

func i(n int64) string   { return strconv.FormatInt(n, 10) }
func f(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
