package decisionlog_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/decisionlog"
)

// BenchmarkObserve measures one decision's cost on each path: the ones a
// request pays on every decision (unsampled, dropped), serially and from
// every core at once, and the written ones, into io.Discard.
func BenchmarkObserve(b *testing.B) {
	const unlimited = 1_000_000_000 // records a second: the written path, never dropped
	discard := slog.New(slog.NewJSONHandler(io.Discard, nil))
	secret := []byte("0123456789abcdef")
	cases := []struct {
		name  string
		cfg   decisionlog.Config
		event observe.Event
	}{
		{"allowed/unsampled", decisionlog.Config{}, event(observe.Allowed)},
		{"allowed/sampled_1pct", decisionlog.Config{SampleAllowed: 0.01, Rate: 1, Burst: 1}, event(observe.Allowed)},
		{"denied/dropped", decisionlog.Config{Rate: 1, Burst: 1}, event(observe.Denied)},
		{"denied/written", decisionlog.Config{Rate: unlimited, Burst: unlimited}, event(observe.Denied)},
		{"denied/written_hmac", decisionlog.Config{Secret: secret, Rate: unlimited, Burst: unlimited}, event(observe.Denied)},
	}
	for _, tc := range cases {
		tc.cfg.Logger = discard
		// A real clock: the manual one's mutex is not what a server pays.
		l, err := decisionlog.New(tc.cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		l.Observe(ctx, tc.event)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l.Observe(ctx, tc.event)
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Observe(ctx, tc.event)
				}
			})
		})
	}
}
