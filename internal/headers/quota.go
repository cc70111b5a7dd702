package headers

import (
	"math"
	"time"

	"github.com/floodgate-io/floodgate"
)

// QuotaOf describes a limit and its latest decision as the RateLimit fields
// do: q is the limit's capacity (Decision.Limit) and w the time it takes to
// earn that capacity back at the limit's rate, which is the period for the
// window algorithms and for buckets whose burst is their rate.
func QuotaOf(name string, l floodgate.Limit, d floodgate.Decision) Quota {
	capacity := d.Limit
	if capacity <= 0 && l.Rate > 0 {
		capacity = l.Rate
		if (l.Algorithm == floodgate.TokenBucket || l.Algorithm == floodgate.LeakyBucket) && l.Burst > 0 {
			capacity = l.Burst
		}
	}
	window := l.Period
	if l.Rate > 0 && capacity > 0 && capacity != l.Rate {
		w := math.Ceil(float64(l.Period) * float64(capacity) / float64(l.Rate))
		window = time.Duration(min(w, float64(math.MaxInt64)))
	}
	return Quota{Name: name, Quota: capacity, Window: window, Remaining: d.Remaining, Reset: d.ResetAfter}
}
