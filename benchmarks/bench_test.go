package benchmarks_test

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/floodgate-io/floodgate"
)

// The baseline is golang.org/x/time/rate, the limiter most Go services use
// today: one *rate.Limiter per key, and for many keys a map of them guarded
// the two ways people write it (sync.Map, or a sharded mutex map). Both sides
// use a token bucket of the same rate and burst, high enough that the
// benchmark measures the decision, not the denial path. Compare the pairs of
// one run: see docs/benchmarks.md.

const (
	benchRate = 1_000_000_000 // per second
	manyKeys  = 100_000
)

var ctx = context.Background()

var benchLimit = floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: benchRate, Period: time.Second}

func BenchmarkOneKey(b *testing.B) {
	b.Run("floodgate", func(b *testing.B) {
		m := floodgate.NewMemory()
		b.ReportAllocs()
		for b.Loop() {
			m.AllowN(ctx, "user:42", benchLimit, 1)
		}
	})
	b.Run("x-time-rate", func(b *testing.B) {
		l := rate.NewLimiter(benchRate, benchRate)
		b.ReportAllocs()
		for b.Loop() {
			l.AllowN(time.Now(), 1)
		}
	})
}

func BenchmarkOneKeyParallel(b *testing.B) {
	b.Run("floodgate", func(b *testing.B) {
		m := floodgate.NewMemory()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.AllowN(ctx, "user:42", benchLimit, 1)
			}
		})
	})
	b.Run("x-time-rate", func(b *testing.B) {
		l := rate.NewLimiter(benchRate, benchRate)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.AllowN(time.Now(), 1)
			}
		})
	})
}

// BenchmarkManyKeysParallel spreads the goroutines over 100k keys in a
// scattered order, as a gateway sees distinct users.
func BenchmarkManyKeysParallel(b *testing.B) {
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	b.Run("floodgate", func(b *testing.B) {
		m := floodgate.NewMemory()
		for _, k := range keys {
			m.AllowN(ctx, k, benchLimit, 1)
		}
		runOverKeys(b, keys, func(k string) { m.AllowN(ctx, k, benchLimit, 1) })
	})
	b.Run("x-time-rate-sync.Map", func(b *testing.B) {
		var limiters sync.Map
		get := func(k string) *rate.Limiter {
			if l, ok := limiters.Load(k); ok {
				return l.(*rate.Limiter)
			}
			l, _ := limiters.LoadOrStore(k, rate.NewLimiter(benchRate, benchRate))
			return l.(*rate.Limiter)
		}
		for _, k := range keys {
			get(k)
		}
		runOverKeys(b, keys, func(k string) { get(k).AllowN(time.Now(), 1) })
	})
	b.Run("x-time-rate-sharded-map", func(b *testing.B) {
		limiters := newShardedLimiters()
		for _, k := range keys {
			limiters.get(k)
		}
		runOverKeys(b, keys, func(k string) { limiters.get(k).AllowN(time.Now(), 1) })
	})
}

func runOverKeys(b *testing.B, keys []string, decide func(string)) {
	var seeds atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		x := seeds.Add(0x9E3779B97F4A7C15) | 1 // xorshift: a cheap scattered order per goroutine
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			decide(keys[x%uint64(len(keys))])
		}
	})
}

// shardedLimiters is the map of *rate.Limiter people write by hand: 256
// mutex-guarded maps.
type shardedLimiters struct {
	seed   maphash.Seed
	shards [256]struct {
		sync.Mutex
		m map[string]*rate.Limiter
		_ [40]byte
	}
}

func newShardedLimiters() *shardedLimiters {
	s := &shardedLimiters{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*rate.Limiter)
	}
	return s
}

func (s *shardedLimiters) get(k string) *rate.Limiter {
	sh := &s.shards[maphash.String(s.seed, k)%256]
	sh.Lock()
	l := sh.m[k]
	if l == nil {
		l = rate.NewLimiter(benchRate, benchRate)
		sh.m[k] = l
	}
	sh.Unlock()
	return l
}
