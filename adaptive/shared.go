package adaptive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
)

// SharedFactor is where the nodes of a fleet put their adaptive factors so
// that each applies the smallest: the fleet shrinks a shared limit
// together when any node sees the backend struggle (see
// RateOptions.Shared for the trade-off).
type SharedFactor interface {
	// Publish records node's factor f, in (0, 1], for ttl: a node that
	// stops publishing stops counting ttl after its last Publish.
	Publish(ctx context.Context, node string, f float64, ttl time.Duration) error
	// Min returns the smallest factor of the nodes alive, 1 when there
	// are none.
	Min(ctx context.Context) (float64, error)
}

// ErrInvalidFactor is wrapped by the errors of a Publish whose arguments
// cannot be recorded; the message names the problem.
var ErrInvalidFactor = errors.New("adaptive: invalid shared factor")

// RedisFactor is a SharedFactor in Redis: a hash of the nodes' factors and
// a sorted set of their expiry times, both under one hash tag (so one
// Cluster slot), updated and read by scripts. Both keys expire on their
// own when no node has published for longer than the longest TTL (plus
// ClockSlack with a Clock). It is safe for concurrent use.
type RedisFactor struct {
	client  rueidis.Client
	keys    []string // the factors' hash, the expiries' sorted set
	clock   floodgate.Clock
	slackMS int64
}

// RedisFactorOptions configures NewRedisFactor.
type RedisFactorOptions struct {
	// Client is the connection to Redis (required). RedisFactor does not
	// close it.
	Client rueidis.Client
	// Key names the fleet's set of factors, e.g. "fg:adaptive:payments"
	// (required): every node of one fleet uses the same.
	Key string
	// Clock, when set, times the TTLs instead of the server's TIME: for
	// tests and simulation. The keys then live ClockSlack longer than the
	// TTLs need, to absorb the difference between this clock and the
	// server's.
	Clock      floodgate.Clock
	ClockSlack time.Duration // default 1 minute; only with Clock
}

// NewRedisFactor returns a RedisFactor, or an error wrapping
// ErrInvalidOptions that names the option at fault.
func NewRedisFactor(opts RedisFactorOptions) (*RedisFactor, error) {
	switch {
	case opts.Client == nil:
		return nil, fmt.Errorf("%w: RedisFactorOptions.Client is nil", ErrInvalidOptions)
	case opts.Key == "":
		return nil, fmt.Errorf("%w: RedisFactorOptions.Key is empty", ErrInvalidOptions)
	case opts.ClockSlack < 0:
		return nil, fmt.Errorf("%w: RedisFactorOptions.ClockSlack must not be negative, got %s", ErrInvalidOptions, opts.ClockSlack)
	}
	f := &RedisFactor{client: opts.Client, clock: opts.Clock}
	tag := "{" + opts.Key + "}"
	f.keys = []string{tag + ":factors", tag + ":expiries"}
	if opts.Clock != nil {
		if opts.ClockSlack == 0 {
			opts.ClockSlack = time.Minute
		}
		f.slackMS = opts.ClockSlack.Milliseconds()
	}
	return f, nil
}

// now is the time the scripts go by, in µs; -1 asks them for the server's.
func (f *RedisFactor) now() string {
	if f.clock == nil {
		return "-1"
	}
	return strconv.FormatInt(f.clock.Now().UnixMicro(), 10)
}

// scriptNow is the scripts' clock: ARGV[1] in µs, or the server's TIME
// when it is negative.
const scriptNow = `
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
`

// publishScript: ARGV = now, node, ttl (µs), factor, slack (ms). The keys
// live until the latest expiry plus the slack.
var publishScript = rueidis.NewLuaScript(scriptNow + `
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
local keep = math.ceil(ttl / 1000) + tonumber(ARGV[5])
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) < keep then redis.call('PEXPIRE', k, keep) end
end
return 1
`)

// minScript: ARGV = now. Drops the nodes whose factor expired and returns
// the smallest of the others, as a string ("1" with none).
var minScript = rueidis.NewLuaScript(scriptNow + `
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('HDEL', KEYS[1], unpack(dead))
end
local live = redis.call('ZRANGE', KEYS[2], 0, -1)
local m = 1
if #live > 0 then
  for _, v in ipairs(redis.call('HMGET', KEYS[1], unpack(live))) do
    if v then m = math.min(m, tonumber(v)) end
  end
end
return string.format('%.17g', m)
`)

// Publish implements SharedFactor.
func (f *RedisFactor) Publish(ctx context.Context, node string, factor float64, ttl time.Duration) error {
	switch {
	case node == "":
		return fmt.Errorf("%w: node name is empty", ErrInvalidFactor)
	case !(factor > 0 && factor <= 1):
		return fmt.Errorf("%w: factor must be in (0, 1], got %v", ErrInvalidFactor, factor)
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: ttl must be at least 1ms, got %s", ErrInvalidFactor, ttl)
	}
	args := []string{f.now(), node, strconv.FormatInt(ttl.Microseconds(), 10),
		strconv.FormatFloat(factor, 'g', -1, 64), strconv.FormatInt(f.slackMS, 10)}
	if err := publishScript.Exec(ctx, f.client, f.keys, args).Error(); err != nil {
		return fmt.Errorf("%w: publishing %s's factor to %s: %w", floodgate.ErrStoreUnavailable, node, f.keys[0], err)
	}
	return nil
}

// Min implements SharedFactor.
func (f *RedisFactor) Min(ctx context.Context) (float64, error) {
	s, err := minScript.Exec(ctx, f.client, f.keys, []string{f.now()}).ToString()
	if err != nil {
		return 1, fmt.Errorf("%w: reading the fleet's factors from %s: %w", floodgate.ErrStoreUnavailable, f.keys[0], err)
	}
	m, err := strconv.ParseFloat(s, 64)
	if err != nil || !(m > 0 && m <= 1) {
		return 1, fmt.Errorf("adaptive: %s holds a factor out of (0, 1]: %q", f.keys[0], s)
	}
	return m, nil
}
