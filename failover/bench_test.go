package failover

import (
	"context"
	"log/slog"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// BenchmarkOpenBreaker measures a decision while the store is down and the
// breaker open: what every request pays during an outage. It runs on the
// system clock, as in production.
func BenchmarkOpenBreaker(b *testing.B) {
	for _, mode := range Modes() {
		b.Run(string(mode), func(b *testing.B) {
			l := openForBench(b, mode)
			ctx, limit := context.Background(), floodgate.PerSecond(1_000_000_000)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.AllowN(ctx, "user:42", limit, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(mode)+"/parallel", func(b *testing.B) {
			l := openForBench(b, mode)
			ctx, limit := context.Background(), floodgate.PerSecond(1_000_000_000)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.AllowN(ctx, "user:42", limit, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHealthyStore measures what the decorator adds to a store that
// answers at once: the timeout and the goroutine that guarantees it.
func BenchmarkHealthyStore(b *testing.B) {
	l, err := New(floodgate.NewMemory(), Config{Mode: FailLocal})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx, limit := context.Background(), floodgate.PerSecond(1_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.AllowN(ctx, "user:42", limit, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func openForBench(b *testing.B, mode Mode) Limiter {
	f := newFake(failUnavailable)
	l, err := New(f, Config{Mode: mode, CoolDown: 1 << 62, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Close)
	for l.State() != Open {
		l.AllowN(context.Background(), "user:42", floodgate.PerSecond(1), 1)
	}
	return l
}
