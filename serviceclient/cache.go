package serviceclient

import (
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// overLimit is the cache of keys the service found over their limit: a
// fixed table of slots, each holding one denial until the instant its
// RetryAfter ends. A key hashes to one slot; a new denial replaces what
// the slot held. A nil *overLimit caches nothing.
type overLimit struct {
	clock floodgate.Clock
	seed  maphash.Seed

	mu    sync.Mutex
	slots []denial
}

// denial is one cached answer.
type denial struct {
	key   string          // the explicit key, or policyKey's; "" for a free slot
	limit floodgate.Limit // explicit only
	cost  int64           // the cost that was denied: a larger one is denied too
	until time.Time       // the answer holds before this instant
	at    time.Time       // when the answer arrived
	d     floodgate.Decision
}

func newOverLimit(size int, clock floodgate.Clock) *overLimit {
	return &overLimit{clock: clock, seed: maphash.MakeSeed(), slots: make([]denial, size)}
}

func (c *overLimit) slot(key string, limit floodgate.Limit) *denial {
	h := maphash.String(c.seed, key) ^ uint64(limit.Rate)*0x9e3779b97f4a7c15 ^ uint64(limit.Period) ^ uint64(limit.Burst)<<17
	return &c.slots[h%uint64(len(c.slots))]
}

// lookup answers a request for cost under key and limit from the cache:
// denied, with RetryAfter the time left, when a denial of at most this
// cost is held and its RetryAfter has not ended. A read (cost 0) is never
// answered here.
func (c *overLimit) lookup(key string, limit floodgate.Limit, cost int64) (floodgate.Decision, bool) {
	if c == nil || cost == 0 {
		return floodgate.Decision{}, false
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slot(key, limit)
	if s.key != key || s.limit != limit || cost < s.cost || !now.Before(s.until) {
		return floodgate.Decision{}, false
	}
	d := s.d
	d.RetryAfter = s.until.Sub(now)
	d.ResetAfter = max(0, d.ResetAfter-now.Sub(s.at))
	return d, true
}

// deny caches a denial of cost under key and limit that arrived now, with
// its RetryAfter. Only a denial that ends is cached (RetryAfter > 0).
func (c *overLimit) deny(key string, limit floodgate.Limit, cost int64, d floodgate.Decision) {
	if c == nil || d.Allowed || d.RetryAfter <= 0 || cost == 0 {
		return
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.slot(key, limit) = denial{key: key, limit: limit, cost: cost, until: now.Add(d.RetryAfter), at: now, d: d}
}

// explicit and denyExplicit are the cache of explicit decisions.
func (c *overLimit) explicit(key string, limit floodgate.Limit, cost int64) (floodgate.Decision, bool) {
	return c.lookup(key, limit, cost)
}

func (c *overLimit) denyExplicit(key string, limit floodgate.Limit, cost int64, d floodgate.Decision) {
	c.deny(key, limit, cost, d)
}

// policy answers a policy decision from the cache when every descriptor is
// held as over its limit (a descriptor not held might pass, and the
// service must count it).
func (c *overLimit) policy(domain string, descs []Descriptor, cost int64) (Result, bool) {
	if c == nil || cost == 0 {
		return Result{}, false
	}
	r := Result{Cached: true, Descriptors: make([]DescriptorResult, len(descs))}
	for i, d := range descs {
		if len(d.Costs) > 0 { // costs of its own: the cached cost says nothing
			return Result{}, false
		}
		dec, ok := c.lookup(policyKey(domain, d), floodgate.Limit{}, cost)
		if !ok {
			return Result{}, false
		}
		r.Descriptors[i] = DescriptorResult{Limited: true, Limit: dec.Limit, Remaining: dec.Remaining,
			RetryAfter: dec.RetryAfter, ResetAfter: dec.ResetAfter}
	}
	return r, true
}

// denyPolicy caches the denied descriptors of a policy decision that carry
// a RetryAfter (HTTP's answers; gRPC's carry none).
func (c *overLimit) denyPolicy(domain string, descs []Descriptor, cost int64, r Result) {
	if c == nil {
		return
	}
	for i, dr := range r.Descriptors {
		if !dr.Allowed && dr.RetryAfter > 0 && len(descs[i].Costs) == 0 {
			c.deny(policyKey(domain, descs[i]), floodgate.Limit{}, cost, floodgate.Decision{
				Limit: dr.Limit, Remaining: dr.Remaining, RetryAfter: dr.RetryAfter, ResetAfter: dr.ResetAfter})
		}
	}
}

// policyKey names a descriptor of a domain in the cache: NUL cannot be
// told apart from a value, so the parts are length-prefixed.
func policyKey(domain string, d Descriptor) string {
	var b strings.Builder
	part := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	b.WriteString("policy|")
	part(domain)
	for _, e := range d.Entries {
		part(e.Key)
		part(e.Value)
	}
	return b.String()
}
