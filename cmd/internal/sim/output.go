package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// summaryColumns are the columns of the text table and of the CSV, one row
// per Result.
var summaryColumns = []string{"strategy", "workload", "nodes", "interval", "load", "delay", "loss", "skew",
	"offered", "admitted", "over_max", "over_p99", "over_share", "undershoot", "shortfall", "utilisation",
	"shared_per_decision", "shared_per_s", "fair_nodes", "fair_clients"}

// summaryRow renders r's summary numbers in a fixed format, so that the
// same results always print the same bytes.
func summaryRow(r Result) []string {
	us := func(v int64) string { return (time.Duration(v) * time.Microsecond).String() }
	f := func(v float64, digits int) string { return strconv.FormatFloat(v, 'f', digits, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{r.Strategy, r.Workload, strconv.Itoa(r.Nodes), us(r.Interval), f(r.Load, 2), us(r.Delay),
		f(r.Loss, 3), us(r.Skew), i(r.Offered), i(r.Admitted), i(r.OvershootMax), i(r.OvershootP99),
		f(r.OvershootShare, 3), i(r.Undershoot), i(r.Shortfall), f(r.Utilisation, 3),
		f(r.SharedPerDecision, 4), f(r.SharedPerSecond, 1), f(r.FairnessNodes, 3), f(r.FairnessClients, 3)}
}

// WriteTable prints one aligned row per result, with a header.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	line := func(cells []string) {
		for _, c := range cells {
			fmt.Fprint(tw, c, "\t")
		}
		fmt.Fprintln(tw)
	}
	line(summaryColumns)
	for _, r := range results {
		line(summaryRow(r))
	}
	return tw.Flush()
}

// WriteCSV prints one CSV record per result, with a header.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(summaryColumns); err != nil {
		return err
	}
	for _, r := range results {
		if err := cw.Write(summaryRow(r)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteWindowsCSV prints the per-window series of every result, one record
// per window, for plots of admitted over time.
func WriteWindowsCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"strategy", "workload", "nodes", "interval", "window_start_s", "offered", "admitted",
		"denied", "overshoot", "undershoot", "shortfall"})
	for _, r := range results {
		for _, win := range r.Windows {
			i := func(v int64) string { return strconv.FormatInt(v, 10) }
			_ = cw.Write([]string{r.Strategy, r.Workload, strconv.Itoa(r.Nodes),
				(time.Duration(r.Interval) * time.Microsecond).String(),
				strconv.FormatFloat(float64(win.Start)/1e6, 'f', 6, 64), i(win.Offered), i(win.Admitted),
				i(win.Denied), i(win.Overshoot), i(win.Undershoot), i(win.Shortfall)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON prints the results, series included, as indented JSON.
// encoding/json writes struct fields in order and floats in their shortest
// exact form, so equal results give equal bytes.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}
