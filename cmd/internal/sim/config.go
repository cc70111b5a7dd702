package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate"
)

// ErrInvalidConfig is wrapped by every error Run returns for a Config it
// cannot simulate.
var ErrInvalidConfig = errors.New("sim: invalid config")

// Strategies names the strategies a Config may ask for, in the order a
// table lists them.
var Strategies = []string{"exact", "local", "leased", "synced", "sampled", "gossip"}

// Workloads names the arrival patterns a Config may ask for.
var Workloads = []string{"uniform", "zipf", "sticky", "shift", "bursts", "skew", "churn"}

// Config is one simulation: a fleet, a strategy, a workload and a network.
type Config struct {
	// Strategy is one of Strategies.
	Strategy string
	// Nodes is the fleet's size N (the churn workload adds one node that
	// joins later).
	Nodes int
	// Interval is T, the period of each node's round (leased Sync, synced
	// Sync, gossip Tick and push/pull). The strategies without rounds
	// (exact, local, sampled) ignore it, but it must still be positive.
	Interval time.Duration
	// Limit is the one global limit, on one key. The strategies refuse the
	// algorithms they do not serve (leased and gossip: fixed_window only).
	Limit floodgate.Limit
	// Workload is one of Workloads; Params tunes it.
	Workload string
	Params   WorkloadParams
	// Load is the offered rate as a multiple of the limit: 2 offers twice
	// Rate per Period over the fleet, as Poisson arrivals.
	Load float64
	// Duration is the simulated time, at least one Period; only the whole
	// Periods in it are measured.
	Duration time.Duration
	// Delay is the round trip of a call to the shared store or between two
	// nodes; Jitter adds a uniform [0, Jitter] to each one-way trip.
	Delay, Jitter time.Duration
	// Loss is the probability that one message (request or reply) is lost.
	Loss float64
	// Skew spreads the nodes' clock offsets evenly over [−Skew, +Skew].
	Skew time.Duration
	// Seed seeds every random choice.
	Seed uint64
	// OneIn is the sampled strategy's 1/p (0: 10).
	OneIn int64
	// Timeout bounds one store call (0: 50ms): a lost call answers
	// floodgate.ErrStoreUnavailable after it.
	Timeout time.Duration
	// Clients is the number of distinct clients sending (0: 100).
	Clients int
}

// servedAlgorithms lists what the strategies that do not serve every
// algorithm count, as their constructors' docs say, so that a run fails at
// once instead of refusing every request.
var servedAlgorithms = map[string][]floodgate.Algorithm{
	"leased":  {floodgate.FixedWindow},
	"gossip":  {floodgate.FixedWindow},
	"synced":  {floodgate.FixedWindow, floodgate.SlidingWindow},
	"sampled": {floodgate.FixedWindow, floodgate.SlidingWindow},
}

// Defaults of the optional Config fields.
const (
	DefaultOneIn   = 10
	DefaultTimeout = 50 * time.Millisecond
	DefaultClients = 100
)

// maxArrivals bounds the requests of one run, so that a typo in Load or
// Duration fails at once instead of running for hours.
const maxArrivals = 50_000_000

// withDefaults fills the optional fields documented on Config.
func (c Config) withDefaults() Config {
	if c.OneIn == 0 {
		c.OneIn = DefaultOneIn
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Limit.Algorithm == "" {
		c.Limit.Algorithm = floodgate.FixedWindow
	}
	c.Params = c.Params.withDefaults(c)
	return c
}

// validate names the first thing wrong with c (after withDefaults).
func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case !slices.Contains(Strategies, c.Strategy):
		return bad("unknown strategy %q; want one of %s", c.Strategy, strings.Join(Strategies, ", "))
	case !slices.Contains(Workloads, c.Workload):
		return bad("unknown workload %q; want one of %s", c.Workload, strings.Join(Workloads, ", "))
	case c.Nodes < 1 || c.Nodes > 1000:
		return bad("nodes must be in 1..1000, got %d", c.Nodes)
	case c.Interval <= 0:
		return bad("interval must be positive, got %s", c.Interval)
	case !(c.Load > 0) || math.IsInf(c.Load, 0):
		return bad("load must be a positive multiple of the limit, got %v", c.Load)
	case c.Delay < 0 || c.Jitter < 0:
		return bad("delay and jitter must not be negative, got %s and %s", c.Delay, c.Jitter)
	case !(c.Loss >= 0 && c.Loss < 1):
		return bad("loss must be in [0, 1), got %v", c.Loss)
	case c.Skew < 0:
		return bad("skew must not be negative, got %s", c.Skew)
	case c.OneIn < 1:
		return bad("one-in must be at least 1, got %d", c.OneIn)
	case c.Timeout < 0:
		return bad("timeout must not be negative, got %s", c.Timeout)
	case c.Clients < 1:
		return bad("clients must be at least 1, got %d", c.Clients)
	}
	if err := c.Limit.Validate(); err != nil {
		return fmt.Errorf("%w: limit: %w", ErrInvalidConfig, err)
	}
	if served, ok := servedAlgorithms[c.Strategy]; ok && !slices.Contains(served, c.Limit.Algorithm) {
		return fmt.Errorf("%w: the %s strategy serves %v, not %s: %w",
			ErrInvalidConfig, c.Strategy, served, c.Limit.Algorithm, floodgate.ErrInvalidLimit)
	}
	if c.Limit.Period%time.Microsecond != 0 || c.Duration < c.Limit.Period {
		return bad("duration %s must hold at least one period of the limit (%s, whole microseconds)", c.Duration, c.Limit.Period)
	}
	if n := c.Load * float64(c.Limit.Rate) * float64(c.Duration) / float64(c.Limit.Period); n > maxArrivals {
		return bad("load %v × rate %d over %s is about %.0f requests, more than %d", c.Load, c.Limit.Rate, c.Duration, n, maxArrivals)
	}
	return c.Params.validate(c)
}
