package shared

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// LeaseRequest is cluster.LeaseRequest: one node's renewal of its lease on
// one key.
type LeaseRequest struct {
	Key      string
	Node     string
	Rate     int64
	Period   time.Duration
	Lease    time.Duration
	Window   int64
	Used     int64
	Pinned   int64
	Nodes    int
	Demand   int64
	Leaving  bool
	Seq      int64
	Answered int64
}

// LeaseGrant is cluster.LeaseGrant: a node's new lease on a key.
type LeaseGrant struct {
	Window     int64
	Granted    int64
	Used       int64
	Valid      time.Duration
	WindowLeft time.Duration
	Unleased   int64
	Stale      bool
}

// MaxLeasedRate is cluster.MaxLeasedRate, the largest Rate the leased
// strategy serves: the Redis coordinator computes in Lua numbers (doubles),
// which hold these sums and quotients exactly.
const MaxLeasedRate = 1 << 40

// MaxLeaseSpan bounds Period and Lease so that times in microseconds, and
// their sums, stay exact in a Lua number.
const MaxLeaseSpan = 366 * 24 * time.Hour

// leaseMaxSeq bounds LeaseRequest.Seq so that a Lua number holds it exactly.
const leaseMaxSeq = 1<<53 - 1

// MaxLeaseNodes bounds LeaseRequest.Nodes (and keeps sums of demands exact).
const MaxLeaseNodes = 1 << 12

// ErrInvalidLeaseRequest is cluster.ErrInvalidLeaseRequest, wrapped by the
// errors of CheckLease.
var ErrInvalidLeaseRequest = errors.New("cluster: invalid lease request")

// CheckLease validates a request the way both coordinators do.
func CheckLease(r LeaseRequest) error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidLeaseRequest)
	case r.Node == "":
		return fmt.Errorf("%w: node name is empty", ErrInvalidLeaseRequest)
	case r.Rate <= 0 || r.Rate > MaxLeasedRate:
		return fmt.Errorf("%w: rate must be in 1..%d, got %d", floodgate.ErrInvalidLimit, int64(MaxLeasedRate), r.Rate)
	case r.Period < time.Microsecond || r.Period > MaxLeaseSpan || r.Period%time.Microsecond != 0:
		return fmt.Errorf("%w: period must be a whole number of microseconds in 1µs..%s, got %s",
			floodgate.ErrInvalidLimit, MaxLeaseSpan, r.Period)
	case r.Lease < time.Microsecond || r.Lease > MaxLeaseSpan:
		return fmt.Errorf("%w: lease must be in 1µs..%s, got %s", ErrInvalidLeaseRequest, MaxLeaseSpan, r.Lease)
	case r.Nodes < 1 || r.Nodes > MaxLeaseNodes:
		return fmt.Errorf("%w: nodes must be in 1..%d, got %d", ErrInvalidLeaseRequest, MaxLeaseNodes, r.Nodes)
	case r.Seq < 0 || r.Seq > leaseMaxSeq || r.Answered < 0 || r.Answered > leaseMaxSeq:
		return fmt.Errorf("%w: seq and answered must be in 0..%d, got %d and %d",
			ErrInvalidLeaseRequest, int64(leaseMaxSeq), r.Seq, r.Answered)
	case r.Used < 0 || r.Pinned < 0 || r.Demand < 0:
		return fmt.Errorf("%w: used, pinned and demand must not be negative, got %d, %d, %d",
			ErrInvalidLeaseRequest, r.Used, r.Pinned, r.Demand)
	}
	return nil
}
