package decisionlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/decisionlog"
)

// A denial and a degraded decision, as a SIEM receives them: one JSON
// object per line. The clock is fixed so that the output is too; a real
// Logger takes the system clock and a buffered writer.
func Example() {
	clock := floodgate.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	log, err := decisionlog.New(decisionlog.Config{
		Logger: slog.New(slog.NewJSONHandler(os.Stdout, nil)),
		Secret: []byte("per-deployment secret, 16+ bytes"),
		Clock:  clock,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	log.Observe(ctx, observe.Event{
		Surface: observe.SurfaceProxy, Policy: "api", Limit: "per_ip",
		Key: "203.0.113.7", Client: "203.0.113.7:52114",
		Outcome: observe.Denied, Cost: 1,
		Decision: floodgate.Decision{Limit: 100, Remaining: 0, RetryAfter: 1500 * time.Millisecond, ResetAfter: 60 * time.Second},
		Latency:  42 * time.Microsecond,
	})
	log.Observe(ctx, observe.Event{
		Surface: observe.SurfaceServe, Policy: "login", Limit: "per_user",
		Key: "alice", Outcome: observe.Allowed, Degraded: true, Cost: 1,
		Err:      errors.New("redis: connection refused"),
		Decision: floodgate.Decision{Allowed: true, Limit: 5, Remaining: 4},
		Latency:  2 * time.Millisecond, StoreTime: 2 * time.Millisecond,
	})
	// Output:
	// {"time":"2026-03-01T12:00:00Z","level":"WARN","msg":"floodgate decision","surface":"proxy","policy":"api","limit":"per_ip","key_hash":"3792a325fceb87e3","client":"203.0.113.7:52114","result":"denied","degraded":false,"remaining":0,"quota":100,"cost":1,"retry_after_ms":1500,"retry_after":2,"reset_after_ms":60000,"latency_us":42,"store_us":0}
	// {"time":"2026-03-01T12:00:00Z","level":"WARN","msg":"floodgate decision","surface":"serve","policy":"login","limit":"per_user","key_hash":"759cf36dba5e712b","client":"","result":"allowed","degraded":true,"remaining":4,"quota":5,"cost":1,"retry_after_ms":0,"retry_after":0,"reset_after_ms":0,"latency_us":2000,"store_us":2000,"error":"redis: connection refused"}
}

// A flood of denials: the log writes its burst, then suppresses and counts
// the rest, and says so in one summary record per interval.
func Example_suppressed() {
	clock := floodgate.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	log, err := decisionlog.New(decisionlog.Config{
		Logger: slog.New(slog.NewJSONHandler(os.Stdout, nil)),
		Rate:   1, Burst: 2, SummaryInterval: time.Minute,
		Clock: clock,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	flood := observe.Event{Surface: observe.SurfaceHTTP, Policy: "login", Limit: "per_ip", Key: "198.51.100.9",
		Outcome: observe.Denied, Cost: 1, Decision: floodgate.Decision{Limit: 5, RetryAfter: time.Second}}
	for range 1000 {
		log.Observe(ctx, flood)
	}
	clock.Advance(time.Minute)
	if err := log.Flush(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"time":"2026-03-01T12:00:00Z","level":"WARN","msg":"floodgate decision","surface":"httplimit","policy":"login","limit":"per_ip","key_hash":"2ba3fdf22d357ae9","client":"","result":"denied","degraded":false,"remaining":0,"quota":5,"cost":1,"retry_after_ms":1000,"retry_after":1,"reset_after_ms":0,"latency_us":0,"store_us":0}
	// {"time":"2026-03-01T12:00:00Z","level":"WARN","msg":"floodgate decision","surface":"httplimit","policy":"login","limit":"per_ip","key_hash":"2ba3fdf22d357ae9","client":"","result":"denied","degraded":false,"remaining":0,"quota":5,"cost":1,"retry_after_ms":1000,"retry_after":1,"reset_after_ms":0,"latency_us":0,"store_us":0}
	// {"time":"2026-03-01T12:01:00Z","level":"WARN","msg":"floodgate decision log suppressed","suppressed":{"allowed":0,"denied":998,"shadow_denied":0,"shed":0,"error":0},"suppressed_total":998,"interval_ms":60000}
}
