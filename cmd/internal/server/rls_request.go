package server

import (
	"fmt"
	"math"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// rlsRaw is a RateLimitRequest as read, before it is checked: what both
// readers of requests produce, protojson's messages (fromRLS, for /json)
// and the gRPC wire (decodeRLS), so that one function (request) checks
// and converts for both.
type rlsRaw struct {
	domain string
	hits   uint32
	descs  []rawDescriptor
}

// rawDescriptor is a RateLimitDescriptor as read.
type rawDescriptor struct {
	entries     []policy.Entry
	negative    bool
	hits        uint64 // hits_addend, when hitsSet
	hitsSet     bool
	override    rawOverride // when hasOverride
	hasOverride bool
}

// rawOverride is a RateLimitDescriptor.RateLimitOverride as read.
type rawOverride struct {
	perUnit       uint32
	unit          typev3.RateLimitUnit
	multiplier    uint32 // when multiplierSet
	multiplierSet bool
}

// fromRLS validates an Envoy request and turns it into an engine request.
func fromRLS(req *rlsv3.RateLimitRequest, atomic bool) (engine.Request, error) {
	raw := rlsRaw{domain: req.GetDomain(), hits: req.GetHitsAddend(), descs: make([]rawDescriptor, len(req.GetDescriptors()))}
	for i, d := range req.GetDescriptors() {
		rd := &raw.descs[i]
		rd.negative = d.GetIsNegativeHits()
		rd.entries = make([]policy.Entry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			rd.entries[j] = policy.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		if h := d.GetHitsAddend(); h != nil {
			rd.hits, rd.hitsSet = h.GetValue(), true
		}
		if o := d.GetLimit(); o != nil {
			rd.override, rd.hasOverride = overrideOf(o), true
		}
	}
	return raw.request(atomic, make([]engine.Descriptor, len(raw.descs)))
}

func overrideOf(o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) rawOverride {
	out := rawOverride{perUnit: o.GetRequestsPerUnit(), unit: o.GetUnit()}
	if m := o.GetUnitMultiplier(); m != nil {
		out.multiplier, out.multiplierSet = m.GetValue(), true
	}
	return out
}

// request checks r and turns it into an engine request whose descriptors
// are written to descs (len(r.descs) of them). Its errors name the
// problem. hits_addend is the cost the limits that count units take;
// those that count requests take 1 per descriptor (0 for a hits_addend of
// 0, a read), and is_negative_hits gives back units only: the request
// happened.
func (r *rlsRaw) request(atomic bool, descs []engine.Descriptor) (engine.Request, error) {
	switch {
	case r.domain == "":
		return engine.Request{}, fmt.Errorf("domain is empty")
	case len(r.domain) > floodgate.MaxValueBytes:
		return engine.Request{}, floodgate.CheckLength("domain", r.domain, floodgate.MaxValueBytes)
	case len(r.descs) == 0:
		return engine.Request{}, fmt.Errorf("descriptors is empty: give at least one")
	case len(r.descs) > engine.MaxDescriptors:
		return engine.Request{}, fmt.Errorf("%d descriptors, at most %d", len(r.descs), engine.MaxDescriptors)
	}
	for i := range r.descs {
		if err := r.descs[i].descriptor(&descs[i]); err != nil {
			return engine.Request{}, fmt.Errorf("descriptors[%d]: %w", i, err)
		}
	}
	return engine.Request{Domain: r.domain, Hits: int64(r.hits), Atomic: atomic, Descriptors: descs}, nil
}

// descriptor checks d and turns it into out.
func (d *rawDescriptor) descriptor(out *engine.Descriptor) error {
	switch n := len(d.entries); {
	case n == 0:
		return fmt.Errorf("no entries")
	case n > engine.MaxEntries:
		return fmt.Errorf("%d entries, at most %d (too deep)", n, engine.MaxEntries)
	}
	for j, e := range d.entries {
		if e.Key == "" {
			return fmt.Errorf("entries[%d]: key is empty", j)
		}
		if err := engine.CheckEntry(e); err != nil {
			return fmt.Errorf("entries[%d]: %w", j, err)
		}
	}
	*out = engine.Descriptor{Entries: d.entries, Refund: d.negative}
	if d.hitsSet {
		if d.hits > engine.MaxHits {
			return fmt.Errorf("hits_addend %d above the maximum %d", d.hits, int64(engine.MaxHits))
		}
		out.Hits, out.HitsSet = int64(d.hits), true
	}
	if d.hasOverride {
		limit, err := d.override.limit()
		if err != nil {
			return fmt.Errorf("limit override: %w", err)
		}
		out.Override = &limit
	}
	return nil
}

// limit is o as a fixed window, as Envoy's service counts it;
// requests_per_unit 0 denies every request, as in a configuration.
func (o rawOverride) limit() (floodgate.Limit, error) {
	unit, ok := unitPeriods[o.unit]
	if !ok {
		return floodgate.Limit{}, fmt.Errorf("unit %s: want SECOND, MINUTE, HOUR, DAY, WEEK (7), MONTH or YEAR", o.unit)
	}
	period := unit
	if o.multiplierSet {
		if o.multiplier == 0 {
			return floodgate.Limit{}, fmt.Errorf("unit_multiplier must be above 0")
		}
		if int64(o.multiplier) > int64(math.MaxInt64/unit) {
			return floodgate.Limit{}, fmt.Errorf("unit_multiplier %d is too large", o.multiplier)
		}
		period *= time.Duration(o.multiplier)
	}
	return floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: int64(o.perUnit), Period: period}, nil
}
