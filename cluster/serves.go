package cluster

import (
	"fmt"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
)

// The Serves functions say, before any request, whether a strategy can
// enforce a limit: nil, or the error its AllowN would return for that
// limit, wrapping floodgate.ErrInvalidLimit. A service checks its policy
// with them when it starts or reloads, so that a limit no strategy of the
// fleet can serve is refused then, not at the first request.

// LocalServes reports whether the local strategy serves limit: every valid
// limit of every algorithm.
func LocalServes(limit floodgate.Limit) error { return limit.Validate() }

// LeasedServes reports whether the leased strategy serves limit:
// fixed_window only, of a Rate up to MaxLeasedRate over a Period up to a
// year.
func LeasedServes(limit floodgate.Limit) error {
	if limit.Algorithm != floodgate.FixedWindow {
		return fmt.Errorf("%w: the leased strategy serves %s only (a budget of Rate per window), not %s",
			floodgate.ErrInvalidLimit, floodgate.FixedWindow, limit.Algorithm)
	}
	if err := limit.Validate(); err != nil {
		return err
	}
	if limit.Rate > MaxLeasedRate || limit.Period > shared.MaxLeaseSpan {
		return fmt.Errorf("%w: the leased strategy serves rates up to %d and periods up to %s, got %s",
			floodgate.ErrInvalidLimit, int64(MaxLeasedRate), shared.MaxLeaseSpan, limit)
	}
	return nil
}

// SyncedServes reports whether the synced strategy serves limit:
// fixed_window and sliding_window.
func SyncedServes(limit floodgate.Limit) error {
	_, err := counterParams("synced", limit)
	return err
}

// SampledServes reports whether the sampled strategy, pushing 1 in oneIn
// admitted requests, serves limit: fixed_window and sliding_window, with
// oneIn × Rate an exact count.
func SampledServes(limit floodgate.Limit, oneIn int64) error {
	if oneIn < 1 || oneIn > sampledMaxOneIn {
		return fmt.Errorf("cluster: sampled: one in %d: want 1 to %d", oneIn, sampledMaxOneIn)
	}
	_, err := (&Sampled{oneIn: oneIn}).params(limit)
	return err
}

// GossipServes reports whether the gossip strategy serves limit:
// fixed_window only.
func GossipServes(limit floodgate.Limit) error {
	_, err := gossipServes(limit)
	return err
}
