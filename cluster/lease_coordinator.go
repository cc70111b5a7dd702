package cluster

import (
	"context"
	"time"

	"github.com/floodgate-io/floodgate/cluster/internal/shared"
)

// Coordinator holds the shared budget of the leased strategy: for every key,
// the units of the current window that each node holds as a lease and has
// used, and the demand each node last reported. It answers one renewal at a
// time, atomically, so that the sum of the units it has leased in a window
// never exceeds the window's budget.
//
// Windows are numbered by the coordinator's own clock: window w covers
// [w·Period, (w+1)·Period) in microseconds since the Unix epoch, as read by
// the coordinator (Redis TIME, or the Clock of a clustertest.Coordinator).
// Nodes never compare their own clocks with it; they only measure
// durations.
//
// Two implementations give the same answers for the same requests and
// times: RedisCoordinator (a Lua script per renewal) and
// clustertest.Coordinator (plain Go, for tests and simulations).
type Coordinator interface {
	// Renew reports a node's use of its lease on a key and returns its new
	// lease. An error wrapping floodgate.ErrStoreUnavailable means the
	// coordinator could not be reached in time.
	Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error)
}

// LeaseRequest is one node's renewal of its lease on one key.
type LeaseRequest struct {
	// Key is the limited key, Node the renewing node's unique name.
	Key  string
	Node string
	// Rate is the budget of one window; Period the window's length (a whole
	// number of microseconds). A change of Period starts the key afresh.
	Rate   int64
	Period time.Duration
	// Lease is how long the node wants the lease to last; the coordinator
	// cuts it at the window's end. A node that has not renewed for two
	// Leases no longer counts in the sharing of the budget.
	Lease time.Duration
	// Window is the window of the lease being reported, as the coordinator
	// numbered it in its last grant; any other value (say -1) reports none.
	Window int64
	// Used is how many units of Window the node has admitted under its leases.
	Used int64
	// Pinned is how many more units of its current lease the node may still
	// admit while this renewal is in flight: the new grant is never below
	// Used+Pinned, so that those admissions stay covered.
	Pinned int64
	// Nodes is the number of live nodes as the renewing node sees them
	// (Members.Count): the budget left over beyond the demands is split over
	// at least this many, so that the first node to ask in a window leaves
	// the shares of the nodes that have not asked yet.
	Nodes int
	// Demand is how many units the node expects to be asked for during the
	// next Lease period: what it admitted and denied lately, as a rate.
	Demand int64
	// Leaving gives back everything above Used+Pinned and removes the node
	// from the sharing of the budget (idle key, node shutting down).
	Leaving bool
	// Seq orders one node's renewals: the coordinator applies a renewal
	// only if its Seq is above that of the last renewal it applied for the
	// node and key, and answers an older one with a Stale grant, changing
	// nothing. A call the node gave up on may still reach the coordinator
	// after a later one (another connection, a stalled server); without the
	// order it could shrink the later grant under admissions it covers.
	// 0 asks for no ordering.
	Seq int64
	// Answered is the Seq of the node's last renewal of the key whose
	// answer it applied; 0 when it has none (a new key, a restart). A node
	// that reports on an older Window than the coordinator's while holding
	// a grant of the current one is charged that whole grant as used (it
	// may have forgotten the key after using it), unless Answered shows
	// that no answer granting it units of the current window ever reached
	// it (lost answers, retries across a window's end).
	Answered int64
}

// LeaseGrant is a node's new lease on a key.
type LeaseGrant struct {
	// Window is the coordinator's current window; Granted the units the node
	// may admit in it in total, those already used included.
	Window  int64
	Granted int64
	// Used is what the coordinator counts as used of Granted: the node's
	// report, or its whole earlier grant of Window when the node reported
	// another window (it forgot the key or restarted, and may have used it).
	Used int64
	// Valid is how long the lease lasts from the coordinator's now: the
	// requested Lease, cut at the window's end. WindowLeft is the time to the
	// window's end.
	Valid      time.Duration
	WindowLeft time.Duration
	// Unleased is what is left of the window's budget after this grant,
	// leased to no node.
	Unleased int64
	// Stale reports a renewal older than one already applied (see
	// LeaseRequest.Seq): nothing changed, Granted and Used are the node's
	// record of the current window, and Valid is 0.
	Stale bool
}

// MaxLeasedRate is the largest Rate the leased strategy serves. The Redis
// coordinator computes in Lua numbers (doubles), which hold these sums and
// quotients exactly.
const MaxLeasedRate = shared.MaxLeasedRate

// ErrInvalidLeaseRequest is wrapped by the errors a Coordinator returns for
// a malformed request (a bug in the caller, never a network problem).
var ErrInvalidLeaseRequest = shared.ErrInvalidLeaseRequest
