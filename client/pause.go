package client

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Pauses are the pre-emptive pauses of one server: the policies a RateLimit
// field (or the gRPC metadata of the same name) reported at r=0, or at an r
// within the learned margin (Learn), each until its t. A request to that
// server waits for the last of them instead of being sent to be refused.
// The transport keeps one per host; grpclimit's client interceptors one per
// target. The zero value has no pause and no margin and is ready for use;
// it is safe for concurrent use.
type Pauses struct {
	until    atomic.Int64 // the latest end of a pause, Unix nanoseconds; 0 for none
	learning atomic.Bool  // a margin may be above 0
	mu       sync.Mutex
	ends     map[string]int64 // policy name → end of its pause
	margin   margin
}

// marginHalfLife is how many of a lesson's periods a margin takes to halve.
// The others sharing a quota come and go more slowly than its window
// turns: in the shared-limit evaluation of docs/clients.md (a 1 s window),
// 1 period sent 1.40 requests per success, 4 sent 1.16, 8 and 16 both
// 1.12. A client left alone with a margin m of a quota q still gets q − m
// units a window, and m falls below 1 within 8·log2(q) windows.
const marginHalfLife = 8

// margin is what Learn learned: units, halved every half since at.
type margin struct{ units, at, half int64 } // at: Unix nanoseconds; half: nanoseconds

// Note records a policy's state as a server reported it at now: remaining
// at or below the margin (0 until Learn teaches one) with reset > 0 pauses
// the policy until now+reset; anything else ends its pause.
func (p *Pauses) Note(policy string, remaining int64, reset time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if remaining <= p.marginAt(now) && reset > 0 {
		if p.ends == nil {
			p.ends = make(map[string]int64)
		}
		p.ends[policy] = now.Add(reset).UnixNano()
	} else {
		delete(p.ends, policy)
	}
	p.latest(now)
}

// Learn records at now that other clients took at least units of a
// server's quota between two of this client's answers (the transport
// reads that from the r of the RateLimit fields; see NewTransport). The
// quota is shared, and an r this client hears is read by the others too:
// from now on Note treats an r up to the margin, the largest lesson still
// remembered, as r=0, and the request waits for the policy's t instead of
// being sent to be refused. The margin halves every marginHalfLife (8)
// periods (the policy's t: the time its quota takes to come back) after
// the last lesson, so that it fades once the others are gone. A client
// alone never sees others take anything and never learns a margin.
func (p *Pauses) Learn(units int64, period time.Duration, now time.Time) {
	if units <= 0 || period <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.margin = margin{units: max(units, p.marginAt(now)), at: now.UnixNano(), half: int64(min(period, math.MaxInt64/marginHalfLife)) * marginHalfLife}
	p.learning.Store(true)
}

// Margin is the r at or below which Note pauses a policy, at now: 0 until
// Learn teaches more.
func (p *Pauses) Margin(now time.Time) int64 {
	if !p.learning.Load() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.marginAt(now)
}

// Learning reports whether a margin may be above 0: a lock-free check.
func (p *Pauses) Learning() bool { return p.learning.Load() }

// marginAt is the margin at now, halved once per period since it was
// learned; it forgets a margin that reached 0. Called with mu held.
func (p *Pauses) marginAt(now time.Time) int64 {
	m := p.margin
	if m.units == 0 {
		return 0
	}
	halvings := max(now.UnixNano()-m.at, 0) / m.half
	if halvings >= 63 || m.units>>halvings == 0 {
		p.margin = margin{}
		p.learning.Store(false)
		return 0
	}
	return m.units >> halvings
}

// Active reports whether some pause may still run: a lock-free check, so
// that a caller can skip reading fields while nothing is paused.
func (p *Pauses) Active() bool { return p.until.Load() != 0 }

// Left is the time from now until the last pause ends; 0 when none runs.
// It forgets the pauses that ended.
func (p *Pauses) Left(now time.Time) time.Duration {
	until := p.until.Load()
	if until == 0 {
		return 0
	}
	if d := time.Duration(until - now.UnixNano()); d > 0 {
		return d
	}
	p.mu.Lock()
	p.latest(now)
	p.mu.Unlock()
	return 0
}

// latest drops ended pauses and stores the end of the last one in until.
// Called with mu held.
func (p *Pauses) latest(now time.Time) {
	var last int64
	for name, end := range p.ends {
		if end <= now.UnixNano() {
			delete(p.ends, name)
		}
		last = max(last, end)
	}
	if last <= now.UnixNano() {
		last = 0
	}
	p.until.Store(last)
}
