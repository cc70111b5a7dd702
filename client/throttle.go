package client

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Throttle is client-side adaptive throttling, as in Google's SRE book
// ("Handling Overload"): the client counts, over the last Window, the
// requests it attempted and the ones the server accepted, and rejects a new
// request locally, without sending it, with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// While the server accepts everything nothing is rejected; when it refuses
// most requests the client stops sending what would be refused anyway, so
// the server spends nothing on them, and it keeps sending a share that
// grows back as soon as the server accepts again. A larger K throttles
// later and lets more doomed requests through; K=2 lets the client send
// about twice what the server accepts. Locally rejected requests count as
// requests, which is what makes the probability rise under a refusing
// server.
type Throttle struct {
	K      float64       // ≥ 1: the multiple of the accepted requests let through
	Window time.Duration // ≥ throttleBuckets nanoseconds: how far back requests are counted
}

// DefaultThrottle is the throttle of a transport built without WithThrottle
// or WithoutThrottle.
var DefaultThrottle = Throttle{K: 2, Window: 2 * time.Minute}

// throttleBuckets is how many slices the window is counted in: the counts
// slide by a 24th of the window at a time.
const throttleBuckets = 24

func (t Throttle) validate() error {
	if math.IsNaN(t.K) || math.IsInf(t.K, 0) || t.K < 1 || t.Window < throttleBuckets {
		return fmt.Errorf("%w: WithThrottle(K %v, Window %v): want a finite K ≥ 1 and a Window of at least %dns",
			ErrInvalidOption, t.K, t.Window, throttleBuckets)
	}
	return nil
}

// NewState returns a throttle that has seen nothing, or an error naming a
// bad field.
func (t Throttle) NewState() (*ThrottleState, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &ThrottleState{k: t.K, width: int64(t.Window / throttleBuckets)}, nil
}

// ThrottleState is one throttle's counts, for one server. It is safe for
// concurrent use.
type ThrottleState struct {
	k     float64
	width int64 // nanoseconds per bucket

	mu       sync.Mutex
	slot     int64 // the current bucket's number: Unix nanoseconds / width
	buckets  [throttleBuckets]struct{ requests, accepts int64 }
	requests int64 // totals over the buckets
	accepts  int64
}

// Admit counts a request at now and decides whether to send it: false
// means reject it locally. random draws a uniform number in [0, 1); it is
// called only when the rejection probability, p, is above 0.
func (s *ThrottleState) Admit(now time.Time, random func() float64) (ok bool, p float64) {
	s.mu.Lock()
	s.advance(now)
	p = max(0, (float64(s.requests)-s.k*float64(s.accepts))/float64(s.requests+1))
	s.requests++
	s.buckets[bucket(s.slot)].requests++
	s.mu.Unlock()
	return p == 0 || random() >= p, p
}

// Accept records at now that the server accepted a request.
func (s *ThrottleState) Accept(now time.Time) {
	s.mu.Lock()
	s.advance(now)
	s.accepts++
	s.buckets[bucket(s.slot)].accepts++
	s.mu.Unlock()
}

// Probability is the rejection probability a request would meet at now.
func (s *ThrottleState) Probability(now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now)
	return max(0, (float64(s.requests)-s.k*float64(s.accepts))/float64(s.requests+1))
}

// advance moves the window to now, dropping the buckets that fell out of
// it; a clock that went back keeps the current bucket.
func (s *ThrottleState) advance(now time.Time) {
	slot := now.UnixNano() / s.width
	if slot <= s.slot {
		return
	}
	for i := int64(1); i <= min(slot-s.slot, throttleBuckets); i++ {
		b := &s.buckets[bucket(s.slot+i)]
		s.requests -= b.requests
		s.accepts -= b.accepts
		*b = struct{ requests, accepts int64 }{}
	}
	s.slot = slot
}

// bucket is the index of slot's bucket, for slots before 1970 too.
func bucket(slot int64) int { return int((slot%throttleBuckets + throttleBuckets) % throttleBuckets) }
