package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"time"
)

// MaxCallLog bounds the calls Config.CallLog holds: each takes 24 bytes
// until the run ends, so the bound keeps a long run at a high rate from
// taking the load generator's memory (16 Mi calls: 384 MiB). Each worker
// holds its share of it. Calls past it are counted and named in the log's
// last line, not written.
const MaxCallLog = 1 << 24

// callRecord is one call of the call log.
type callRecord struct {
	start   int64 // Unix ns: when its latency starts
	latency time.Duration
	outcome outcome
}

type outcome uint8

const (
	outcomeAllowed outcome = iota
	outcomeDenied
	outcomeError
)

func (o outcome) String() string {
	switch o {
	case outcomeAllowed:
		return "allowed"
	case outcomeDenied:
		return "denied"
	}
	return "error"
}

// callLog is one worker's share of the call log, recorded without a lock
// and written once the workers have stopped.
type callLog struct {
	records []callRecord
	room    int // the records this worker may hold; 0 without a log
	dropped int64
}

func (l *callLog) record(start time.Time, latency time.Duration, o outcome) {
	switch {
	case len(l.records) < l.room:
		l.records = append(l.records, callRecord{start: start.UnixNano(), latency: latency, outcome: o})
	case l.room > 0:
		l.dropped++
	}
}

// writeCallLog writes the workers' calls to w in the order they started,
// one per line: the start (Unix ns), the latency (ns) and the outcome
// (allowed, denied or error), after a header line that names the columns.
func writeCallLog(w io.Writer, logs []*callLog) error {
	var all []callRecord
	var dropped int64
	for _, l := range logs {
		all = append(all, l.records...)
		dropped += l.dropped
	}
	slices.SortFunc(all, func(a, b callRecord) int { return int(min(max(a.start-b.start, -1), 1)) })
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# start_unix_ns latency_ns outcome")
	for _, r := range all {
		fmt.Fprintf(bw, "%d %d %s\n", r.start, r.latency.Nanoseconds(), r.outcome)
	}
	if dropped > 0 {
		fmt.Fprintf(bw, "# %d more calls are not in the log: it holds at most %d\n", dropped, MaxCallLog)
	}
	return bw.Flush()
}
