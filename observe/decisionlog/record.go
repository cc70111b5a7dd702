package decisionlog

import (
	"log/slog"
	"time"

	"github.com/floodgate-io/floodgate/observe"
)

// The records' messages: what a SIEM rule matches on.
const (
	MsgDecision   = "floodgate decision"
	MsgSuppressed = "floodgate decision log suppressed"
)

// record is e's decision record: the field set the package doc lists, in
// its order.
func (l *Logger) record(now time.Time, level slog.Level, e *observe.Event) slog.Record {
	r := slog.NewRecord(now, level, MsgDecision, 0)
	d := &e.Decision
	r.AddAttrs(
		slog.String("surface", e.Surface),
		slog.String("policy", e.Policy),
		slog.String("limit", e.Limit),
		l.keyAttr(e.Key),
		slog.String("client", e.Client),
		slog.String("result", e.Outcome.String()),
		slog.Bool("degraded", e.Degraded),
		slog.Int64("remaining", d.Remaining),
		slog.Int64("quota", d.Limit),
		slog.Int64("cost", e.Cost),
		slog.Int64("retry_after_ms", ceilUnits(d.RetryAfter, time.Millisecond)),
		slog.Int64("retry_after", ceilUnits(d.RetryAfter, time.Second)),
		slog.Int64("reset_after_ms", ceilUnits(d.ResetAfter, time.Millisecond)),
		slog.Int64("latency_us", e.Latency.Microseconds()),
		slog.Int64("store_us", e.StoreTime.Microseconds()),
	)
	if e.Err != nil {
		r.AddAttrs(slog.String("error", e.Err.Error()))
	}
	return r
}

func (l *Logger) keyAttr(key string) slog.Attr {
	switch {
	case l.raw:
		return slog.String("key", key)
	case key == "":
		return slog.String("key_hash", "")
	}
	return slog.String("key_hash", l.hashes.hash(key))
}

// ceilUnits is d in whole units, rounded up as a client that waits it
// must round (Retry-After's seconds are so rounded); a negative d, which a
// RetryAfter uses for a cost that can never pass, is -1.
func ceilUnits(d, unit time.Duration) int64 {
	if d < 0 {
		return -1
	}
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n
}

// summaryRecord reports the suppressed records of c.
func (l *Logger) summaryRecord(now time.Time, c suppressedCounts) slog.Record {
	r := slog.NewRecord(now, l.summary.Level(), MsgSuppressed, 0)
	by := make([]slog.Attr, 0, outcomes)
	for _, o := range observe.Outcomes() {
		by = append(by, slog.Int64(o.String(), c.n[outcomeIndex(o)]))
	}
	if n := c.n[0]; n > 0 {
		by = append(by, slog.Int64(observe.Outcome(0).String(), n))
	}
	r.AddAttrs(
		slog.Attr{Key: "suppressed", Value: slog.GroupValue(by...)},
		slog.Int64("suppressed_total", c.total),
		slog.Int64("interval_ms", c.interval.Milliseconds()),
	)
	return r
}
