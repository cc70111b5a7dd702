package cluster

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/rediserr"
)

//go:embed lua/counter_add.lua
var counterAddScript string

// counterAddSHA is what EVALSHA calls the script by.
var counterAddSHA = func() string {
	sum := sha1.Sum([]byte(counterAddScript))
	return hex.EncodeToString(sum[:])
}()

// RedisCounterConfig configures a RedisCounter.
type RedisCounterConfig struct {
	// Client is the connection to Redis, standalone or Cluster; share the
	// one of a redisstore.Limiter with its Client method. Required.
	Client rueidis.Client
	// KeyPrefix is put before every key: a key k of period P lives in a
	// hash at KeyPrefix + "{" + k + "}:" + P + ":nodes", P in microseconds,
	// with one field for the sums and one per node that wrote in the last
	// two windows. The braces are a hash tag, so all of k's counters share
	// one Redis Cluster slot.
	KeyPrefix string
	// Timeout bounds one Add, the whole pipelined batch (default 50ms):
	// the wait of a request that pushes (sampled). The Add of a synced
	// round, which no request waits for, is bounded by the round's own
	// deadline instead (SyncedConfig.Timeout).
	Timeout time.Duration
	// Clock, when set, supplies the time of every add instead of the
	// server's TIME: for tests that compare with a clustertest.Counter.
	// Keys then live ClockSlack longer than their windows need (default 1
	// minute).
	Clock      floodgate.Clock
	ClockSlack time.Duration
}

// RedisCounter is a Counter in Redis: each add is one Lua script call
// (lua/counter_add.lua) that rolls the key's two windows on the server's
// clock and merges the node's counts atomically; the calls of one Add are
// pipelined in a single round trip. A key expires once its current window
// has also served as a previous one. Errors of a store that does not
// answer in time, or whose connection breaks, wrap
// floodgate.ErrStoreUnavailable; Redis may have run some or all of the
// batch's scripts all the same, which the Counter's merge makes harmless.
type RedisCounter struct {
	client  rueidis.Client
	prefix  string
	timeout time.Duration
	clock   floodgate.Clock
	slack   string
}

// NewRedisCounter checks the configuration and returns a RedisCounter. It
// does not contact Redis.
func NewRedisCounter(cfg RedisCounterConfig) (*RedisCounter, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("cluster: RedisCounterConfig.Client is nil")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("cluster: RedisCounterConfig.Timeout must not be negative, got %s", cfg.Timeout)
	case cfg.ClockSlack < 0:
		return nil, fmt.Errorf("cluster: RedisCounterConfig.ClockSlack must not be negative, got %s", cfg.ClockSlack)
	}
	r := &RedisCounter{client: cfg.Client, prefix: cfg.KeyPrefix, timeout: cfg.Timeout, clock: cfg.Clock, slack: "0"}
	if r.timeout == 0 {
		r.timeout = 50 * time.Millisecond
	}
	if cfg.Clock != nil {
		slack := cfg.ClockSlack
		if slack == 0 {
			slack = time.Minute
		}
		r.slack = strconv.FormatInt(slack.Milliseconds(), 10)
	}
	return r, nil
}

// Add implements Counter.
func (r *RedisCounter) Add(ctx context.Context, adds []CounterAdd) ([]CounterRead, error) {
	if err := counterValidateAll(adds); err != nil {
		return nil, err
	}
	if len(adds) == 0 {
		return nil, nil
	}
	callCtx, cancel := r.bound(ctx)
	defer cancel()
	results := r.client.DoMulti(callCtx, r.commands(adds, true)...)
	if retry := counterNoScript(results); len(retry) > 0 {
		// A server that restarted or a new Cluster node has no script yet:
		// send the source to those. An add that failed with NOSCRIPT did
		// not run, and only those are sent again.
		again := make([]CounterAdd, len(retry))
		for j, i := range retry {
			again[j] = adds[i]
		}
		for j, res := range r.client.DoMulti(callCtx, r.commands(again, false)...) {
			results[retry[j]] = res
		}
	}
	reads := make([]CounterRead, len(adds))
	for i, res := range results {
		v, err := res.AsIntSlice()
		if err == nil && len(v) != 6 {
			err = fmt.Errorf("script replied %d values, want 6", len(v))
		}
		if err != nil {
			return nil, r.storeError(ctx, adds[i].Key, err)
		}
		reads[i] = CounterRead{Now: v[0], Window: v[1], Current: v[2], Previous: v[3], Own: v[4], OwnPrevious: v[5]}
	}
	return reads, nil
}

// bound returns the context of one Add: it ends Timeout from now, unless
// it is a synced round's, which its own deadline bounds.
func (r *RedisCounter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if counterRound(ctx) {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.timeout)
}

// commands builds one script call per add, by hash or with the source.
func (r *RedisCounter) commands(adds []CounterAdd, bySHA bool) rueidis.Commands {
	now := "-1"
	if r.clock != nil {
		now = strconv.FormatInt(r.clock.Now().UnixMicro(), 10)
	}
	cmds := make(rueidis.Commands, 0, len(adds))
	for _, a := range adds {
		period := strconv.FormatInt(int64(a.Period/time.Microsecond), 10)
		key := r.prefix + "{" + a.Key + "}:" + period + ":nodes"
		args := []string{now, period, a.Node, strconv.FormatInt(a.Window, 10),
			strconv.FormatInt(a.Count, 10), strconv.FormatInt(a.PrevCount, 10), r.slack}
		if bySHA {
			cmds = append(cmds, r.client.B().Evalsha().Sha1(counterAddSHA).Numkeys(1).Key(key).Arg(args...).Build())
		} else {
			cmds = append(cmds, r.client.B().Eval().Script(counterAddScript).Numkeys(1).Key(key).Arg(args...).Build())
		}
	}
	return cmds
}

// counterNoScript returns the indexes of the calls that failed because
// their server did not know the script.
func counterNoScript(results []rueidis.RedisResult) []int {
	var retry []int
	for i, res := range results {
		if rerr, ok := rueidis.IsRedisErr(res.Error()); ok && rerr.IsNoScript() {
			retry = append(retry, i)
		}
	}
	return retry
}

// storeError classifies a failed call as redisstore does: the caller giving
// up is the caller's error; Redis answering with an error is a defect
// reported as is; no answer in time is the store being unavailable.
func (r *RedisCounter) storeError(ctx context.Context, key string, err error) error {
	return rediserr.Classify(ctx, fmt.Sprintf("cluster: redis counter: key %q", key), err)
}
