package policy

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Concurrency is a bulkhead: how many requests of one route (or of the
// whole one-line proxy) may be in flight to the upstream at once, so that
// one slow route cannot take every slot. `floodgate proxy` gives each
// route its own adaptive.Limiter built from it: the route's own
// `concurrency:` block, else the --concurrency flags.
type Concurrency struct {
	// Off exempts the route from the --concurrency default: no limit.
	Off bool
	// Limit is a fixed limit of at least 1, or 0 for one learned by
	// Algorithm.
	Limit int
	// Algorithm learns the limit when Limit is 0: one of
	// ConcurrencyAlgorithms ("" is DefaultConcurrencyAlgorithm).
	Algorithm string
	// Queue is how many requests may wait for a slot (0: none wait; the
	// ones over the limit are shed at once).
	Queue int
	// MaxWait is the longest a request waits in the queue; 0 without one.
	MaxWait time.Duration
}

// DefaultConcurrencyAlgorithm is the algorithm of an adaptive limit that
// names none: Gradient2, which sees a queue build from the latency alone,
// before requests fail.
const DefaultConcurrencyAlgorithm = "gradient2"

// DefaultMaxWait is the wait of a queue that gives no max_wait (and of
// --max-wait): long enough to absorb a burst, short next to the seconds a
// client waits before it retries.
const DefaultMaxWait = 100 * time.Millisecond

// MaxConcurrency bounds a fixed limit and a queue: beyond it a number is a
// typo, not a capacity.
const MaxConcurrency = 1 << 20

// ConcurrencyAlgorithms are the names of the learning algorithms.
var ConcurrencyAlgorithms = []string{"gradient2", "aimd", "vegas"}

// ParseConcurrencyLimit reads a limit as written: "adaptive" (0), a whole
// number in [1, MaxConcurrency], or "off".
func ParseConcurrencyLimit(s string) (limit int, off bool, err error) {
	switch s {
	case "adaptive":
		return 0, false, nil
	case "off":
		return 0, true, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxConcurrency {
		return 0, false, fmt.Errorf("%q: want adaptive, off or a whole number from 1 to %d", s, MaxConcurrency)
	}
	return n, false, nil
}

// Check reports what is wrong with c, or nil: an unknown algorithm, an
// algorithm with a fixed limit, a queue out of range, a wait without a
// queue or a queue without a wait. The message starts with the name of
// the setting at fault, as the policy file spells it.
func (c Concurrency) Check() error {
	switch {
	case c.Off && (c.Limit != 0 || c.Algorithm != "" || c.Queue != 0 || c.MaxWait != 0):
		return fmt.Errorf("limit off takes no algorithm, queue or max_wait")
	case c.Limit < 0 || c.Limit > MaxConcurrency:
		return fmt.Errorf("limit %d: want adaptive or a whole number from 1 to %d", c.Limit, MaxConcurrency)
	case c.Algorithm != "" && !slices.Contains(ConcurrencyAlgorithms, c.Algorithm):
		return fmt.Errorf("algorithm %q: want gradient2, aimd or vegas", c.Algorithm)
	case c.Algorithm != "" && c.Limit > 0:
		return fmt.Errorf("algorithm %s: a fixed limit (%d) learns nothing; give limit: adaptive", c.Algorithm, c.Limit)
	case c.Queue < 0 || c.Queue > MaxConcurrency:
		return fmt.Errorf("queue %d: want a whole number from 0 to %d", c.Queue, MaxConcurrency)
	case c.MaxWait < 0:
		return fmt.Errorf("max_wait %s is negative", c.MaxWait)
	case c.Queue > 0 && c.MaxWait == 0:
		return fmt.Errorf("queue %d needs a positive max_wait", c.Queue)
	case c.Queue == 0 && c.MaxWait > 0:
		return fmt.Errorf("max_wait %s without a queue: give queue too", c.MaxWait)
	}
	return nil
}

// String renders the settings for logs: "off", "adaptive(gradient2)" or
// "50", with the queue when there is one.
func (c Concurrency) String() string {
	s := strconv.Itoa(c.Limit)
	switch {
	case c.Off:
		return "off"
	case c.Limit == 0:
		alg := c.Algorithm
		if alg == "" {
			alg = DefaultConcurrencyAlgorithm
		}
		s = "adaptive(" + alg + ")"
	}
	if c.Queue > 0 {
		s += fmt.Sprintf(" queue=%d max_wait=%s", c.Queue, c.MaxWait)
	}
	return s
}
