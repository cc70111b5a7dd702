package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Stop says why a run ended.
type Stop string

// The reasons a run ends.
const (
	StopDuration Stop = "duration" // Config.Duration elapsed
	StopRequests Stop = "requests" // Config.Requests calls were made
	StopCanceled Stop = "canceled" // the context passed to Run was cancelled
)

// Report is the outcome of a run. Calls = Allowed + Denied + Errors. The
// latencies are those of the answered calls (allowed or denied): an error's
// latency measures the failure, not the service. In an open-loop run, a
// call that is already overdue when a worker frees up counts its latency
// from when it was due, not sent, so that a service falling behind shows as
// latency rather than as a silently lower rate (the coordinated-omission
// correction of wrk2).
type Report struct {
	Target      Target
	Addr        string
	Concurrency int
	Rate        float64 // the open-loop target rate; 0 for closed loop
	Stopped     Stop

	Calls, Allowed, Denied, Errors int64
	Elapsed                        time.Duration

	Min, Mean, P50, P90, P99, Max time.Duration
	// FirstError is the message of the earliest error, empty if none.
	FirstError string
}

// CallsPerSecond is the achieved throughput: Calls over Elapsed.
func (r Report) CallsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// WriteText writes the report as a small human-readable table.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mode := "closed loop"
	if r.Rate > 0 {
		mode = fmt.Sprintf("open loop at %s/s", trimFloat(r.Rate))
	}
	fmt.Fprintf(tw, "target\t%s %s\t(%d workers, %s)\n", r.Target, r.Addr, r.Concurrency, mode)
	fmt.Fprintf(tw, "elapsed\t%s\t(stopped: %s)\n", r.Elapsed.Round(time.Millisecond), r.Stopped)
	fmt.Fprintf(tw, "calls\t%d\t%.1f/s\n", r.Calls, r.CallsPerSecond())
	fmt.Fprintf(tw, "allowed\t%d\t%s\n", r.Allowed, percent(r.Allowed, r.Calls))
	fmt.Fprintf(tw, "denied\t%d\t%s\n", r.Denied, percent(r.Denied, r.Calls))
	fmt.Fprintf(tw, "errors\t%d\t%s\n", r.Errors, percent(r.Errors, r.Calls))
	if err := tw.Flush(); err != nil {
		return err
	}

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "latency\tmin\tmean\tp50\tp90\tp99\tmax\n")
	if r.Allowed+r.Denied == 0 {
		fmt.Fprintf(tw, "\t-\t-\t-\t-\t-\t-\n")
	} else {
		fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s\t%s\n", short(r.Min), short(r.Mean), short(r.P50), short(r.P90), short(r.P99), short(r.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.FirstError != "" {
		if _, err := fmt.Fprintf(w, "first error: %s\n", r.FirstError); err != nil {
			return err
		}
	}
	return nil
}

// reportJSON is the wire form of a Report: durations in integer
// nanoseconds, with the unit in the name, so that scripts need not parse Go
// duration strings.
type reportJSON struct {
	Target         Target      `json:"target"`
	Addr           string      `json:"addr"`
	Concurrency    int         `json:"concurrency"`
	Rate           float64     `json:"rate"`
	Stopped        Stop        `json:"stopped"`
	ElapsedNS      int64       `json:"elapsed_ns"`
	Calls          int64       `json:"calls"`
	Allowed        int64       `json:"allowed"`
	Denied         int64       `json:"denied"`
	Errors         int64       `json:"errors"`
	CallsPerSecond float64     `json:"calls_per_second"`
	LatencyNS      latencyJSON `json:"latency_ns"`
	FirstError     string      `json:"first_error,omitempty"`
}

type latencyJSON struct {
	Min  int64 `json:"min"`
	Mean int64 `json:"mean"`
	P50  int64 `json:"p50"`
	P90  int64 `json:"p90"`
	P99  int64 `json:"p99"`
	Max  int64 `json:"max"`
}

// MarshalJSON encodes the report in the form WriteJSON writes.
func (r Report) MarshalJSON() ([]byte, error) {
	return json.Marshal(reportJSON{
		Target: r.Target, Addr: r.Addr, Concurrency: r.Concurrency, Rate: r.Rate, Stopped: r.Stopped,
		ElapsedNS: int64(r.Elapsed),
		Calls:     r.Calls, Allowed: r.Allowed, Denied: r.Denied, Errors: r.Errors,
		CallsPerSecond: r.CallsPerSecond(),
		LatencyNS: latencyJSON{
			Min: int64(r.Min), Mean: int64(r.Mean), P50: int64(r.P50),
			P90: int64(r.P90), P99: int64(r.P99), Max: int64(r.Max),
		},
		FirstError: r.FirstError,
	})
}

// UnmarshalJSON decodes what MarshalJSON encodes, so that saved runs can be
// read back and compared.
func (r *Report) UnmarshalJSON(b []byte) error {
	var j reportJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Report{
		Target: j.Target, Addr: j.Addr, Concurrency: j.Concurrency, Rate: j.Rate, Stopped: j.Stopped,
		Calls: j.Calls, Allowed: j.Allowed, Denied: j.Denied, Errors: j.Errors,
		Elapsed: time.Duration(j.ElapsedNS),
		Min:     time.Duration(j.LatencyNS.Min), Mean: time.Duration(j.LatencyNS.Mean),
		P50: time.Duration(j.LatencyNS.P50), P90: time.Duration(j.LatencyNS.P90),
		P99: time.Duration(j.LatencyNS.P99), Max: time.Duration(j.LatencyNS.Max),
		FirstError: j.FirstError,
	}
	return nil
}

// WriteJSON writes the report as one indented JSON object and a newline.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func percent(part, whole int64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// short rounds to three significant digits: the histogram is not more
// precise than that, and 123.456789µs is unreadable in a table.
func short(d time.Duration) string {
	for p := time.Duration(1); p < time.Hour; p *= 10 {
		if d < 1000*p {
			return d.Round(p).String()
		}
	}
	return d.Round(time.Second).String()
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.3f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
