package adaptive

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// storeFactory makes a store on a clock.
type storeFactory func(t *testing.T, clock floodgate.Clock) floodgate.Limiter

func TestScaledLimitHoldsOnMemory(t *testing.T) {
	checkScaledLimitHolds(t, func(_ *testing.T, clock floodgate.Clock) floodgate.Limiter {
		return floodgate.NewMemory(floodgate.WithClock(clock))
	})
}

func TestScaledLimitHoldsOnRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	checkScaledLimitHolds(t, func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
		l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Clock: clock, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	})
}

// checkScaledLimitHolds offers 200 requests per second to a limit of 100
// per second, for 2s at a factor of 1, then for 6s at a factor of 1/2,
// on every algorithm. From a Period after the change on, the store admits
// the scaled rate, 50 per second, and no more (the buckets: plus their
// scaled burst); in the Period of the change, at most the larger rate.
func checkScaledLimitHolds(t *testing.T, store storeFactory) {
	const (
		tick   = 5 * time.Millisecond
		change = 2 * time.Second
		end    = 8 * time.Second
	)
	for _, a := range floodgate.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			clock := floodgate.NewManualClock(healthEpoch) // a whole second: windows align with the change
			r := newTestRate(t, store(t, clock), rateOpts(clock))
			limit := floodgate.Limit{Algorithm: a, Rate: 100, Period: time.Second}
			var admitted []time.Duration
			for at := time.Duration(0); at < end; at += tick {
				if at == change {
					setFactor(r, 0.5)
				}
				d, err := r.AllowN(t.Context(), "scaled:"+string(a), limit, 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted = append(admitted, at)
				}
				clock.Advance(tick)
			}
			count := func(from, to time.Duration) (n int64) {
				for _, at := range admitted {
					if at >= from && at < to {
						n++
					}
				}
				return n
			}
			burst := int64(0)
			if a == floodgate.TokenBucket || a == floodgate.LeakyBucket {
				burst = 50
			}
			steady, seconds := count(change+time.Second, end), int64((end-change-time.Second)/time.Second)
			if steady > 50*seconds+burst || steady < 50*seconds-50 {
				t.Errorf("admitted %d in the %ds after the change settled, want 50/s (%d), plus at most %d",
					steady, seconds, 50*seconds, burst)
			}
			if n := count(change, change+time.Second); n > 100 {
				t.Errorf("admitted %d in the Period of the change, want at most the larger rate, 100", n)
			}
			if a == floodgate.SlidingLog {
				for from := change + time.Second; from+time.Second <= end; from += tick {
					if n := count(from, from+time.Second); n > 50 {
						t.Fatalf("sliding log: %d in the second from +%s, want at most 50", n, from)
					}
				}
			}
		})
	}
}

func newRueidis(t *testing.T, srv *testkit.Server) rueidis.Client {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func newTestRedisFactor(t *testing.T, client rueidis.Client, clock floodgate.Clock) *RedisFactor {
	f, err := NewRedisFactor(RedisFactorOptions{Client: client, Key: "fg:adaptive:api", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The fleet's factor is the smallest of the nodes that published within
// their TTL, by the injected clock.
func TestRedisFactorTakesTheMinimumOfLiveNodes(t *testing.T) {
	srv := testkit.StartServer(t)
	clock := floodgate.NewManualClock(healthEpoch)
	f := newTestRedisFactor(t, newRueidis(t, srv), clock)
	ctx := t.Context()
	for _, step := range []struct {
		advance time.Duration
		node    string // publishes, with a TTL of 3s
		factor  float64
		want    float64
	}{
		{0, "", 0, 1}, // no node: no constraint
		{0, "a", 0.5, 0.5},
		{0, "b", 0.8, 0.5},
		{2 * time.Second, "b", 0.8, 0.5},
		{999 * time.Millisecond, "", 0, 0.5}, // a's last second
		{time.Millisecond, "", 0, 0.8},       // a expired at +3s
		{2 * time.Second, "", 0, 1},          // and b at +5s
	} {
		clock.Advance(step.advance)
		if step.node != "" {
			if err := f.Publish(ctx, step.node, step.factor, 3*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := f.Min(ctx); err != nil || got != step.want {
			t.Fatalf("at +%s: Min = %v, %v; want %v", clock.Now().Sub(healthEpoch), got, err, step.want)
		}
	}
	if n := srv.Do(t, "ZCARD", "{fg:adaptive:api}:expiries"); n != "0" {
		t.Fatalf("%s expired nodes still held", n)
	}
}

// Without a Clock, a factor lives its TTL by the server's TIME, and the
// keys as long: asserted to within 10s, which only a stalled machine
// would exceed.
func TestRedisFactorTTLIsTheServers(t *testing.T) {
	srv := testkit.StartServer(t)
	f := newTestRedisFactor(t, newRueidis(t, srv), nil)
	if err := f.Publish(t.Context(), "a", 0.25, time.Hour); err != nil {
		t.Fatal(err)
	}
	expiry, err := strconv.ParseFloat(srv.Do(t, "ZSCORE", "{fg:adaptive:api}:expiries", "a"), 64)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := srv.Command("TIME")
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(reply.Elems[0].Str, 10, 64)
	usec, _ := strconv.ParseInt(reply.Elems[1].Str, 10, 64)
	left := time.Duration(int64(expiry)-(sec*1e6+usec)) * time.Microsecond
	if left > time.Hour || left < time.Hour-10*time.Second {
		t.Fatalf("the factor expires in %s by the server's clock, want an hour", left)
	}
	for _, key := range []string{"{fg:adaptive:api}:factors", "{fg:adaptive:api}:expiries"} {
		ms, _ := strconv.ParseInt(srv.Do(t, "PTTL", key), 10, 64)
		if ttl := time.Duration(ms) * time.Millisecond; ttl > time.Hour || ttl < time.Hour-10*time.Second {
			t.Fatalf("%s lives %s, want an hour", key, ttl)
		}
	}
	if m, err := f.Min(t.Context()); err != nil || m != 0.25 {
		t.Fatalf("Min = %v, %v; want 0.25", m, err)
	}
}

func TestRedisFactorRejectsBadInput(t *testing.T) {
	srv := testkit.StartServer(t)
	client := newRueidis(t, srv)
	for _, c := range []struct {
		opts RedisFactorOptions
		want string
	}{
		{RedisFactorOptions{Key: "k"}, "Client"},
		{RedisFactorOptions{Client: client}, "Key"},
		{RedisFactorOptions{Client: client, Key: "k", ClockSlack: -time.Second}, "ClockSlack"},
	} {
		if _, err := NewRedisFactor(c.opts); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRedisFactor(%+v) = %v, want ErrInvalidOptions naming %s", c.opts, err, c.want)
		}
	}
	f := newTestRedisFactor(t, client, nil)
	for _, c := range []struct {
		node   string
		factor float64
		ttl    time.Duration
		want   string
	}{
		{"", 0.5, time.Second, "node"},
		{"a", 0, time.Second, "factor"},
		{"a", 1.5, time.Second, "factor"},
		{"a", math.NaN(), time.Second, "factor"},
		{"a", 0.5, 0, "ttl"},
	} {
		if err := f.Publish(t.Context(), c.node, c.factor, c.ttl); !errors.Is(err, ErrInvalidFactor) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Publish(%q, %v, %s) = %v, want ErrInvalidFactor naming the %s", c.node, c.factor, c.ttl, err, c.want)
		}
	}
	srv.Kill()
	if _, err := f.Min(t.Context()); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Errorf("Min with Redis gone: %v, want ErrStoreUnavailable", err)
	}
}

// Two RateLimiters sharing a RedisFactor shrink together.
func TestFleetShrinksTogetherThroughRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	clock := floodgate.NewManualClock(healthEpoch)
	checkFleetShrinksTogether(t, clock, newTestRedisFactor(t, newRueidis(t, srv), clock))
}
