package adaptive

import (
	"fmt"
	"math/bits"
	"net/http"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Health keeps a backend's recent outcomes (each call's latency, failed or
// not) over a sliding window, in bounded memory, and answers their p99
// latency and error ratio. It is safe for concurrent use; Record does not
// allocate and holds its lock for a few field updates.
//
// The window is Slots sub-intervals of Window/Slots each. Each keeps a
// histogram of latencies in log-spaced buckets: exact below 16µs, then 16
// buckets per power of two, so a bucket is at most 1/16 of its lower bound
// wide and a quantile, read as its bucket's midpoint, is within 1/32
// (3.2%) of the sample it stands for. Latencies are clamped to
// [0, MaxLatency]. A sub-interval ages out whole: the window covers
// between Window−Window/Slots and Window of the most recent time.
type Health struct {
	clock  floodgate.Clock
	width  int64 // µs per sub-interval
	window time.Duration

	mu    sync.Mutex
	epoch int64        // the newest sub-interval seen, in widths since the epoch
	slots []healthSlot // ring, indexed by epoch mod len
	total healthSlot   // the sum of the live slots
}

// healthSlot is one sub-interval's outcomes.
type healthSlot struct {
	buckets [numBuckets]uint32
	calls   uint32
	errors  uint32
}

// HealthOptions configures NewHealth.
type HealthOptions struct {
	// Window is how far back Health looks (default DefaultHealthWindow).
	Window time.Duration
	// Slots is how many sub-intervals the window ages out in (default 10,
	// at most 1000): more make the window slide more smoothly and cost
	// 1.8KB each.
	Slots int
	// Clock times the outcomes (nil: the system clock).
	Clock floodgate.Clock
}

// HealthSnapshot is what the window holds at one moment.
type HealthSnapshot struct {
	Calls      int64         // outcomes recorded in the window
	Errors     int64         // of which failed
	P99        time.Duration // 0 with no calls
	ErrorRatio float64       // Errors/Calls; 0 with no calls
}

const (
	// DefaultHealthWindow is the window of a Health made without one.
	DefaultHealthWindow = 3 * time.Second
	// MaxLatency is the largest latency Health tells apart (about 35
	// minutes); longer ones count as it.
	MaxLatency = time.Duration(1<<31-1) * time.Microsecond

	defaultSlots = 10
	maxSlots     = 1000
	exactBelow   = 16 // µs recorded exactly
	subBuckets   = 16 // buckets per power of two above exactBelow
	subBits      = 4  // log2(subBuckets) = log2(exactBelow)
	numBuckets   = exactBelow + (31-subBits)*subBuckets
)

// NewHealth returns an empty Health, or an error wrapping ErrInvalidOptions
// that names the option at fault.
func NewHealth(opts HealthOptions) (*Health, error) {
	if opts.Window == 0 {
		opts.Window = DefaultHealthWindow
	}
	if opts.Slots == 0 {
		opts.Slots = defaultSlots
	}
	switch {
	case opts.Slots < 1 || opts.Slots > maxSlots:
		return nil, fmt.Errorf("%w: health Slots must be in [1, %d], got %d", ErrInvalidOptions, maxSlots, opts.Slots)
	case opts.Window < time.Duration(opts.Slots)*time.Millisecond:
		return nil, fmt.Errorf("%w: health Window must be at least 1ms per slot (%d slots), got %s",
			ErrInvalidOptions, opts.Slots, opts.Window)
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	return &Health{
		clock:  opts.Clock,
		width:  opts.Window.Microseconds() / int64(opts.Slots),
		window: opts.Window,
		slots:  make([]healthSlot, opts.Slots),
	}, nil
}

// Window is how far back Health looks.
func (h *Health) Window() time.Duration { return h.window }

// Record counts one call that took latency and failed or not, at the
// clock's now.
func (h *Health) Record(latency time.Duration, failed bool) {
	b := bucketOf(latency)
	now := h.clock.Now().UnixMicro()
	h.mu.Lock()
	s := h.slotAt(now)
	s.buckets[b]++
	s.calls++
	h.total.buckets[b]++
	h.total.calls++
	if failed {
		s.errors++
		h.total.errors++
	}
	h.mu.Unlock()
}

// Snapshot reads the window at the clock's now.
func (h *Health) Snapshot() HealthSnapshot {
	now := h.clock.Now().UnixMicro()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slotAt(now)
	t := &h.total
	s := HealthSnapshot{Calls: int64(t.calls), Errors: int64(t.errors)}
	if t.calls > 0 {
		s.ErrorRatio = float64(t.errors) / float64(t.calls)
		s.P99 = t.quantile(0.99)
	}
	return s
}

// slotAt ages out the sub-intervals that now has left behind and returns
// the one now falls in. A clock that went backwards records in the newest.
// The caller holds h.mu.
func (h *Health) slotAt(now int64) *healthSlot {
	epoch := now / h.width
	n := int64(len(h.slots))
	if epoch > h.epoch {
		for e := max(h.epoch+1, epoch-n+1); e <= epoch; e++ {
			h.total.sub(&h.slots[e%n])
		}
		h.epoch = epoch
	}
	return &h.slots[h.epoch%n]
}

// sub removes o's counts from s and clears o.
func (s *healthSlot) sub(o *healthSlot) {
	if o.calls == 0 {
		return
	}
	for i, c := range o.buckets {
		s.buckets[i] -= c
	}
	s.calls -= o.calls
	s.errors -= o.errors
	*o = healthSlot{}
}

// quantile returns the midpoint of the bucket that holds the q-th
// quantile's sample (the ⌈q·calls⌉-th smallest). calls > 0.
func (s *healthSlot) quantile(q float64) time.Duration {
	rank := uint32(q * float64(s.calls))
	if float64(rank) < q*float64(s.calls) {
		rank++
	}
	rank = max(rank, 1)
	seen := uint32(0)
	for i, c := range s.buckets {
		if seen += c; seen >= rank {
			return bucketMid(i)
		}
	}
	return MaxLatency // unreachable: the buckets sum to calls
}

// bucketOf returns the bucket of a latency: µs below exactBelow as they
// are, then subBuckets per power of two.
func bucketOf(d time.Duration) int {
	us := uint64(min(max(d, 0), MaxLatency) / time.Microsecond)
	if us < exactBelow {
		return int(us)
	}
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1)), e ≥ subBits
	m := int(us>>(e-subBits)) & (subBuckets - 1)
	return exactBelow + (e-subBits)*subBuckets + m
}

// bucketMid is the middle of bucket i's range, the value it stands for.
func bucketMid(i int) time.Duration {
	if i < exactBelow {
		return time.Duration(i) * time.Microsecond
	}
	e := (i-exactBelow)/subBuckets + subBits
	m := (i - exactBelow) % subBuckets
	width := int64(1) << (e - subBits)
	lower := int64(subBuckets+m) * width
	return time.Duration(lower+width/2) * time.Microsecond
}

// Transport returns an http.RoundTripper that records every call made
// through base (nil: http.DefaultTransport) in h: its time until the
// response's headers, and as failed a transport error or a 5xx or 429
// answer, the backend's signs of overload.
func (h *Health) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return healthTransport{h: h, base: base}
}

type healthTransport struct {
	h    *Health
	base http.RoundTripper
}

func (t healthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := t.h.clock.Now()
	resp, err := t.base.RoundTrip(req)
	failed := err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
	t.h.Record(t.h.clock.Now().Sub(start), failed)
	return resp, err
}
