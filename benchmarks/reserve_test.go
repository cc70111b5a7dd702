package benchmarks_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/floodgate-io/floodgate"
)

// Floodgate's leaky-bucket reservations against golang.org/x/time/rate's:
// a rate.Limiter of burst 1 spaces reservations 1/r apart as a leaky bucket
// does, so on the same random sequence of reservations, cancellations and
// pauses both give every reservation the same Delay, and a Cancel gives
// back the same (x/time/rate's rule: not what later reservations hold).
// Floodgate's queue is bounded (Burst); a reservation beyond it is not OK,
// where x/time/rate would queue it: the sequence cancels those on both
// sides at once. The clock moves in steps of 1/64 s, on which
// x/time/rate's float arithmetic (seconds times 8 per second) is exact and
// Floodgate's microseconds are whole, so the delays must be equal: off
// that grid x/time/rate drifts by nanoseconds, and its Cancel, which
// compares times for equality, then misses a restore now and then.
func TestLeakyReservationsMatchXTimeRate(t *testing.T) {
	const perSecond, burst = 8, 6 // one unit every 125ms, 6 in the queue
	const tick = time.Second / 64 // 15.625ms: exact in binary and in whole µs
	limit := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: perSecond, Period: time.Second, Burst: burst}
	ctx := context.Background()
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 18))
		start := time.Unix(1_700_000_000, 0)
		clock := floodgate.NewManualClock(start)
		mem := floodgate.NewMemory(floodgate.WithClock(clock))
		peer := rate.NewLimiter(perSecond, 1)
		type pair struct {
			ours   *floodgate.Reservation
			theirs *rate.Reservation
		}
		var held []pair
		for step := range 200 {
			now := clock.Now()
			switch op := rng.IntN(10); {
			case op < 5:
				ours, err := mem.Reserve(ctx, "k", limit, 1)
				if err != nil {
					t.Fatal(err)
				}
				theirs := peer.ReserveN(now, 1)
				if !ours.OK() {
					if d := theirs.DelayFrom(now); d < (burst-1)*time.Second/perSecond {
						t.Fatalf("seed %d step %d: refused, where x/time/rate queues it only %s ahead", seed, step, d)
					}
					theirs.CancelAt(now)
					continue
				}
				if a, b := ours.Delay(), theirs.DelayFrom(now); a != b {
					t.Fatalf("seed %d step %d: Delay %s, x/time/rate's %s", seed, step, a, b)
				}
				held = append(held, pair{ours, theirs})
			case op < 7 && len(held) > 0:
				i := rng.IntN(len(held))
				held[i].ours.Cancel()
				held[i].theirs.CancelAt(now)
				held = append(held[:i], held[i+1:]...)
			default:
				clock.Advance(time.Duration(rng.IntN(20)) * tick)
			}
		}
	}
}

// Reserve then Cancel on one key, Floodgate's Memory against
// x/time/rate's Limiter (one key, no map): neither allocates a
// reservation its caller keeps to itself.
func BenchmarkReserveCancel(b *testing.B) {
	b.Run("floodgate", func(b *testing.B) {
		mem := floodgate.NewMemory()
		limit := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 1_000_000, Period: time.Second}
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			r, err := mem.Reserve(ctx, "k", limit, 1)
			if err != nil {
				b.Fatal(err)
			}
			r.Cancel()
		}
	})
	b.Run("x-time-rate", func(b *testing.B) {
		peer := rate.NewLimiter(1_000_000, 1_000_000)
		b.ReportAllocs()
		for b.Loop() {
			peer.ReserveN(time.Now(), 1).Cancel()
		}
	})
}
