package client

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pauses are the pre-emptive pauses of one server: the policies a RateLimit
// field (or the gRPC metadata of the same name) reported at r=0, each until
// its t. A request to that server waits for the last of them instead of
// being sent to be refused. The transport keeps one per host; grpclimit's
// client interceptors one per target. The zero value has no pause and is
// ready for use; it is safe for concurrent use.
type Pauses struct {
	until atomic.Int64 // the latest end of a pause, Unix nanoseconds; 0 for none
	mu    sync.Mutex
	ends  map[string]int64 // policy name → end of its pause
}

// Note records a policy's state as a server reported it at now: remaining
// 0 with reset > 0 pauses the policy until now+reset; anything else ends
// its pause.
func (p *Pauses) Note(policy string, remaining int64, reset time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if remaining == 0 && reset > 0 {
		if p.ends == nil {
			p.ends = make(map[string]int64)
		}
		p.ends[policy] = now.Add(reset).UnixNano()
	} else {
		delete(p.ends, policy)
	}
	p.latest(now)
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
