package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/floodgate-io/floodgate"
)

// LeasedConfig configures NewLeased.
type LeasedConfig struct {
	// Coordinator holds the shared budget (RedisCoordinator in production).
	Coordinator Coordinator
	// Members tells this node's name and the number of live nodes, which
	// sets the default safe capacity.
	Members Members
	// Clock is this node's clock (nil: the system clock). The node only
	// measures durations with it, so it may be skewed against the other
	// nodes' and the coordinator's, but it must not jump backwards.
	Clock floodgate.Clock
	// Interval is T: every T (see Sync and Start) each key's lease is
	// renewed, reporting the key's demand. Required.
	Interval time.Duration
	// EarlyRenewal is the least time between two renewals of one key that
	// its requests trigger by finding the lease exhausted (default
	// Interval/4; at most Interval): it bounds a hot key's calls to the
	// coordinator to 1 + Interval/EarlyRenewal per Interval.
	EarlyRenewal time.Duration
	// Timeout is the longest a request waits for a renewal it triggers
	// (default 50ms); a request whose context ends sooner waits until then.
	// A renewal not answered by then is not an outage: the request is
	// denied, the renewal goes on, and the node admits no more than its
	// lease already covers until the answer arrives. Timeout is also the
	// flight time a renewal pins units for (see LeaseRequest.Pinned).
	Timeout time.Duration
	// OutageAfter is how long a renewal may go unanswered before the
	// coordinator counts as unreachable (default DefaultOutageAfter; at
	// least Timeout). A renewal that fails sooner with the store
	// unavailable (a connection refused or reset) counts at once. Only an
	// unreachable coordinator lets a node past its lease: to the safe
	// capacity, or to the failure policy with ReportUnavailable.
	OutageAfter time.Duration
	// WaitForRenewals makes a request that triggers a renewal wait for its
	// answer however long it takes (up to OutageAfter), on its own
	// goroutine, instead of at most Timeout. It is for simulations and
	// tests on virtual time, where a real-time Timeout would make the
	// outcome depend on the scheduler; in production a slow coordinator
	// would hold requests.
	WaitForRenewals bool
	// SafeFraction is the share of a limit's Rate each node admits per
	// window, in memory, once the coordinator is unreachable and its lease
	// has run out, rounded down. 0 means 1/Members.Count(); otherwise it must
	// be in (0, 1]. A limit whose share rounds to 0 denies while cut off.
	SafeFraction float64
	// MaxKeys bounds the keys the safe capacity holds in memory
	// (floodgate.WithMaxKeys); 0: unbounded.
	MaxKeys int
	// ReportUnavailable, instead of serving the safe capacity, answers the
	// requests that find no lease while the coordinator is unreachable with
	// an error wrapping floodgate.ErrStoreUnavailable, so that a failover
	// policy decides.
	ReportUnavailable bool
	// Logger receives the coordinator going unreachable and coming back
	// (nil: discard).
	Logger *slog.Logger
}

// ErrInvalidLeasedConfig is wrapped by the errors NewLeased returns.
var ErrInvalidLeasedConfig = errors.New("cluster: invalid leased config")

// leasedCheckConfig names the first mistake in cfg, if any.
func leasedCheckConfig(cfg LeasedConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidLeasedConfig}, args...)...)
	}
	switch {
	case cfg.Coordinator == nil:
		return bad("Coordinator is nil")
	case cfg.Members == nil:
		return bad("Members is nil")
	case cfg.Members.Self() == "":
		return bad("Members.Self() is empty: every node needs a unique name")
	case cfg.Interval <= 0:
		return bad("Interval must be positive, got %s", cfg.Interval)
	case cfg.EarlyRenewal < 0 || cfg.EarlyRenewal > cfg.Interval:
		return bad("EarlyRenewal must be in 0..Interval (%s), got %s", cfg.Interval, cfg.EarlyRenewal)
	case cfg.Timeout < 0:
		return bad("Timeout must not be negative, got %s", cfg.Timeout)
	case cfg.OutageAfter < 0:
		return bad("OutageAfter must not be negative, got %s", cfg.OutageAfter)
	case cfg.OutageAfter > 0 && cfg.OutageAfter < cfg.Timeout:
		return bad("OutageAfter (%s) must be at least Timeout (%s)", cfg.OutageAfter, cfg.Timeout)
	case !(cfg.SafeFraction >= 0 && cfg.SafeFraction <= 1): // also refuses NaN
		return bad("SafeFraction must be in [0, 1], got %v", cfg.SafeFraction)
	case cfg.MaxKeys < 0:
		return bad("MaxKeys must not be negative, got %d", cfg.MaxKeys)
	}
	return nil
}
