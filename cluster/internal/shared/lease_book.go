package shared

import (
	"slices"
	"time"
)

// leaseNode is what a coordinator keeps of one node for one key. Granted and
// Used count only while Window is the current window.
type leaseNode struct {
	window    int64
	granted   int64
	used      int64
	demand    int64
	liveUntil int64 // µs; a node whose liveUntil has passed no longer shares the budget
	seq       int64 // the last renewal applied (LeaseRequest.Seq); 0: none ordered
	wseq      int64 // the renewal that first granted units of window; 0: unknown
}

// leaseRenewal is the outcome of one renewal: the renewing node's new
// record, its grant, and the nodes whose records can be dropped.
type leaseRenewal struct {
	self  leaseNode
	grant LeaseGrant
	drop  []string
}

// leaseRenewBook is the coordinator's decision, a pure function of the
// key's node records, the request and the coordinator's time in µs. Both
// coordinators run it: Coordinator in Go, cluster.RedisCoordinator as the
// same steps in lua/lease_renew.lua.
func leaseRenewBook(nodes map[string]leaseNode, req LeaseRequest, now int64) leaseRenewal {
	period := int64(req.Period / time.Microsecond)
	lease := int64(req.Lease / time.Microsecond)
	window := WindowOf(now, period)
	windowEnd := (window + 1) * period
	rate := req.Rate

	var out leaseRenewal
	me, found := nodes[req.Node]
	if found && req.Seq > 0 && req.Seq <= me.seq {
		return leaseStale(me, req, now, window, windowEnd)
	}
	var grantedOthers, usedOthers int64
	demands := make([]int64, 0, len(nodes)+1)
	for name, n := range nodes {
		if name == req.Node {
			continue
		}
		current := n.window == window
		if n.liveUntil < now && !current {
			out.drop = append(out.drop, name) // gone, and holds nothing of this window
			continue
		}
		if current {
			grantedOthers += n.granted
			usedOthers += n.used
		}
		if n.liveUntil >= now {
			demands = append(demands, n.demand)
		}
	}

	var granted, used, floor int64
	if found && me.window == window {
		granted, used = me.granted, me.used
		switch {
		case req.Window == window:
			// Units already admitted can never be taken back; the pinned ones
			// may be admitted while this renewal is in flight.
			used = max(used, min(req.Used, granted))
			floor = min(req.Used+req.Pinned, granted)
		case leaseNeverAnswered(me, req):
			// The grant came from renewals whose answers the node never got
			// (lost, or retried): it cannot have used any of it.
		default:
			// The node holds a grant of this window but does not report on it
			// (it forgot the key, or restarted): it may have used it all.
			used = granted
		}
	}
	floor = max(floor, used)
	demand := min(req.Demand, rate)

	wseq := req.Seq
	if found && me.window == window {
		wseq = me.wseq
	}
	if req.Leaving {
		out.self = leaseNode{window: window, granted: floor, used: used, liveUntil: now - 1, seq: req.Seq, wseq: wseq}
	} else {
		free := max(0, rate-usedOthers-used)
		share := leaseWaterfill(free, append(demands, demand), demand, int64(req.Nodes))
		available := max(0, rate-grantedOthers)
		out.self = leaseNode{
			window:    window,
			granted:   max(floor, min(used+share, available)),
			used:      used,
			demand:    demand,
			liveUntil: now + 2*lease,
			seq:       req.Seq,
			wseq:      wseq,
		}
	}
	out.grant = LeaseGrant{
		Window:     window,
		Granted:    out.self.granted,
		Used:       out.self.used,
		Valid:      time.Duration(min(lease, windowEnd-now)) * time.Microsecond,
		WindowLeft: time.Duration(windowEnd-now) * time.Microsecond,
		Unleased:   max(0, rate-grantedOthers-out.self.granted),
	}
	return out
}

// leaseNeverAnswered reports whether the node's record of the current
// window was made only by renewals whose answers the node never applied:
// the node's last answered renewal is older than the first that granted
// it units of this window. Without both numbers it cannot tell.
func leaseNeverAnswered(me leaseNode, req LeaseRequest) bool {
	return req.Answered > 0 && me.wseq > 0 && req.Answered < me.wseq
}

// leaseStale answers a renewal that arrives after a later one of the same
// node (a call the node gave up on, delivered late or out of order): it
// changes nothing, and its grant lasts no time, so that it could not
// stand in for the later one even if someone read it.
func leaseStale(me leaseNode, req LeaseRequest, now, window, windowEnd int64) leaseRenewal {
	granted, used := me.granted, me.used
	if me.window != window {
		granted, used = 0, 0
	}
	return leaseRenewal{self: me, grant: LeaseGrant{
		Window:     window,
		Granted:    granted,
		Used:       used,
		WindowLeft: time.Duration(windowEnd-now) * time.Microsecond,
		Stale:      true,
	}}
}

// leaseWaterfill shares free units among demands (which include mine) by
// water-filling and returns mine's share. When the demands fit, each gets
// its demand plus an equal part of what is left over, split over at least
// nodes parts, so that a node whose demand grows finds headroom and nodes
// that have not asked yet find theirs; when they do not, every demand below a common
// level is met in full and the others get the level. Integer division rounds
// down, so the shares never add up to more than free.
func leaseWaterfill(free int64, demands []int64, mine, nodes int64) int64 {
	var total int64
	for _, d := range demands {
		total += d
	}
	count := int64(len(demands))
	if total <= free {
		return mine + (free-total)/max(count, nodes)
	}
	sorted := slices.Clone(demands)
	slices.Sort(sorted)
	remaining, left := free, count
	for _, d := range sorted {
		level := remaining / left
		if d > level {
			return min(mine, level)
		}
		remaining -= d
		left--
	}
	return mine // unreachable: the demands did not fit
}
