package serviceclient

import (
	"hash/maphash"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// learned holds the limits the service's answers stated for policy
// descriptors, for FailLocal: a fixed table of slots indexed by a hash of
// the descriptor's policyKey, as the over-limit cache is, so that memory
// is bounded whatever keys callers send; a forgotten descriptor is only
// unknown again. A nil *learned learns nothing.
type learned struct {
	seed maphash.Seed

	mu    sync.Mutex
	slots []learnedSlot
}

type learnedSlot struct {
	key    string            // policyKey; "" for a free slot
	limits []floodgate.Limit // none: the policy does not limit the descriptor
}

func newLearned(size int) *learned {
	return &learned{seed: maphash.MakeSeed(), slots: make([]learnedSlot, size)}
}

func (l *learned) slot(key string) *learnedSlot {
	return &l.slots[maphash.String(l.seed, key)%uint64(len(l.slots))]
}

// get returns the limits learned for key. The slice is never modified
// after put, so it is shared.
func (l *learned) get(key string) ([]floodgate.Limit, bool) {
	if l == nil {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.slot(key)
	return s.limits, s.key == key
}

func (l *learned) put(key string, limits []floodgate.Limit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.slot(key) = learnedSlot{key: key, limits: limits}
}

// learnedLimit is a limit as an answer states it, q units per window w: a
// token bucket of that rate and capacity, which admits what a window of
// the service would in the long run and never a burst above q.
func learnedLimit(q int64, w time.Duration) (floodgate.Limit, bool) {
	l := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: q, Period: w, Burst: q}
	return l, l.Validate() == nil
}

// learnHTTP learns the limits of an HTTP answer to a policy decision: the
// JSON names each descriptor's limits, the RateLimit-Policy field states
// them (q and w), one RateLimit item per enforced limit in the same order.
// A descriptor with a limit the fields do not state is not learned.
func (l *learned) learnHTTP(domain string, descs []Descriptor, a allowAnswer) {
	if l == nil {
		return
	}
	quotas, err := headers.ParseQuotas(a.rateLimit, a.rateLimitPolicy)
	if err != nil {
		return // nothing learned: these descriptors' limits stay as they were
	}
	next := 0
	for i, da := range a.Descriptors {
		var limits []floodgate.Limit
		ok := true
		for _, la := range da.Limits {
			if la.Shadow {
				continue
			}
			var q headers.Quota
			if next < len(quotas) {
				q = quotas[next]
			}
			next++
			lim, valid := learnedLimit(q.Quota, q.Window)
			ok = ok && valid && q.Name == la.Name
			limits = append(limits, lim)
		}
		if ok {
			l.put(policyKey(domain, descs[i]), limits)
		}
	}
}

// responseUnits are the lengths of Envoy's units as the service gives them.
var responseUnits = map[rlsv3.RateLimitResponse_RateLimit_Unit]time.Duration{
	rlsv3.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlsv3.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlsv3.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlsv3.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// learnGRPC learns the limits of a ShouldRateLimit answer: each status's
// current_limit (the descriptor's tightest limit; none: not limited).
func (l *learned) learnGRPC(domain string, descs []Descriptor, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) {
	if l == nil {
		return
	}
	for i, st := range statuses {
		var limits []floodgate.Limit
		if cl := st.GetCurrentLimit(); cl != nil {
			lim, ok := learnedLimit(int64(cl.GetRequestsPerUnit()), responseUnits[cl.GetUnit()])
			if !ok {
				continue
			}
			limits = []floodgate.Limit{lim}
		}
		l.put(policyKey(domain, descs[i]), limits)
	}
}
