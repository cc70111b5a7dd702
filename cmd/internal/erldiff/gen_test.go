package erldiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"
)

// The generator's vocabulary is small on purpose: few keys, values and
// limit names make requests hit configured descriptors, wildcards overlap
// literals, replaces name limits that exist, and counters run out within
// one sequence.
var (
	keys        = []string{"k1", "k2", "k3"}
	literals    = []string{"a", "b", "ab"}
	prefixWilds = []string{"a*", "ab*", "*"}
	middleWilds = []string{"a*b", "*b", "a*b*c"}
	limitNames  = []string{"n1", "n2", "n3"}
	baseUnits   = []string{"second", "minute", "hour", "day"}
	longUnits   = []string{"week", "month", "year"}
	// requestValues are the values a request gives a key whose config
	// value is empty (any value) or that the config does not know.
	requestValues = []string{"a", "b", "ab", "abc", "x", ""}
	// wildcardFills replace a "*" when a request aims at a wildcard.
	wildcardFills = []string{"", "1", "bc", "xyz"}
)

// features are the opt-in parts of envoyproxy/ratelimit's configuration
// (FLOODGATE_ERL_FEATURES): what Floodgate is still gaining, so that a
// default run tests what it claims today.
type features struct {
	middleWildcards bool // "*" in the middle of a value, and several "*"
	shareThreshold  bool // share_threshold on wildcard values
	quotaMode       bool // quota_mode
	longUnits       bool // week, month, year
	overrides       bool // a limit override on some request descriptors
	zeroLimits      bool // requests_per_unit: 0 (every request over the limit)
}

// parseFeatures reads a comma-separated list of feature names, or "all".
func parseFeatures(s string) (features, error) {
	var f features
	for name := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "all":
			f = features{true, true, true, true, true, true}
		case "middle_wildcards":
			f.middleWildcards = true
		case "share_threshold":
			f.shareThreshold = true
		case "quota_mode":
			f.quotaMode = true
		case "long_units":
			f.longUnits = true
		case "overrides":
			f.overrides = true
		case "zero_limits":
			f.zeroLimits = true
		default:
			return f, fmt.Errorf("unknown feature %q: want middle_wildcards, share_threshold, quota_mode, long_units, overrides, zero_limits or all", name)
		}
	}
	return f, nil
}

// domainFile is one configuration file, in envoyproxy/ratelimit's schema.
type domainFile struct {
	Domain      string        `yaml:"domain"`
	Descriptors []*descriptor `yaml:"descriptors,omitempty"`
}

type descriptor struct {
	Key            string        `yaml:"key"`
	Value          string        `yaml:"value,omitempty"`
	RateLimit      *rateLimit    `yaml:"rate_limit,omitempty"`
	ShadowMode     bool          `yaml:"shadow_mode,omitempty"`
	QuotaMode      bool          `yaml:"quota_mode,omitempty"`
	DetailedMetric bool          `yaml:"detailed_metric,omitempty"`
	ValueToMetric  bool          `yaml:"value_to_metric,omitempty"`
	ShareThreshold bool          `yaml:"share_threshold,omitempty"`
	Descriptors    []*descriptor `yaml:"descriptors,omitempty"`
}

type rateLimit struct {
	Unit            string     `yaml:"unit,omitempty"`
	RequestsPerUnit *uint32    `yaml:"requests_per_unit,omitempty"` // nil: none (unlimited)
	Unlimited       bool       `yaml:"unlimited,omitempty"`
	Name            string     `yaml:"name,omitempty"`
	Replaces        []replaces `yaml:"replaces,omitempty"`
}

type replaces struct {
	Name string `yaml:"name"`
}

// scenario is one generated configuration (several domains, one file
// each) and the request sequence sent to both services.
type scenario struct {
	index    int
	files    []*domainFile
	requests []*rlsv3.RateLimitRequest
}

// units are the units the scenario's limits count in, configured and
// overrides: the windows a sequence must not straddle.
func (s *scenario) units() []string {
	var out []string
	add := func(u string) {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	for _, f := range s.files {
		walk(f.Descriptors, func(d *descriptor) {
			if d.RateLimit != nil {
				add(d.RateLimit.Unit)
			}
		})
	}
	for _, r := range s.requests {
		for _, d := range r.GetDescriptors() {
			if o := d.GetLimit(); o != nil {
				add(overrideUnits[o.GetUnit()])
			}
		}
	}
	return out
}

// hasOverrides reports whether a request of the scenario has a limit
// override.
func (s *scenario) hasOverrides() bool {
	for _, r := range s.requests {
		for _, d := range r.GetDescriptors() {
			if d.GetLimit() != nil {
				return true
			}
		}
	}
	return false
}

// overrideUnits names an override's unit as a configuration does.
var overrideUnits = map[typev3.RateLimitUnit]string{
	typev3.RateLimitUnit_SECOND: "second", typev3.RateLimitUnit_MINUTE: "minute", typev3.RateLimitUnit_HOUR: "hour",
	typev3.RateLimitUnit_DAY: "day", typev3.RateLimitUnit(7): "week", typev3.RateLimitUnit_MONTH: "month",
	typev3.RateLimitUnit_YEAR: "year",
}

// yaml renders one file; both services load these exact bytes.
func (f *domainFile) yaml() []byte {
	out, err := yaml.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("marshal a generated config: %v", err)) // plain structs always marshal
	}
	return out
}

func walk(ds []*descriptor, fn func(*descriptor)) {
	for _, d := range ds {
		fn(d)
		walk(d.Descriptors, fn)
	}
}

// generator draws scenarios from one seeded source: a seed and an index
// give the same scenario again.
type generator struct {
	r    *rand.Rand
	feat features
}

func newGenerator(seed uint64, index int, feat features) *generator {
	return &generator{r: rand.New(rand.NewPCG(seed, uint64(index))), feat: feat}
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *generator, xs []T) T { return xs[g.r.IntN(len(xs))] }

// scenario draws 1–3 domains and a sequence of n requests.
func (g *generator) scenario(index, n int) *scenario {
	s := &scenario{index: index}
	for j := range 1 + g.r.IntN(3) {
		f := &domainFile{Domain: fmt.Sprintf("c%d_d%d", index, j)}
		f.Descriptors = g.level(1)
		g.addReplaces(f)
		s.files = append(s.files, f)
	}
	for range n {
		s.requests = append(s.requests, g.request(s))
	}
	return s
}

// maxDepth is the deepest configured descriptor; requests go one deeper.
const maxDepth = 3

// level draws the descriptors of one level: siblings never share a
// key and value (envoyproxy/ratelimit rejects that).
func (g *generator) level(depth int) []*descriptor {
	n := 1 + g.r.IntN(3)
	if depth > 1 {
		n = g.r.IntN(3)
	}
	var out []*descriptor
	seen := map[string]bool{}
	for range n {
		d := &descriptor{Key: pick(g, keys), Value: g.configValue()}
		if seen[d.Key+"\x00"+d.Value] {
			continue
		}
		seen[d.Key+"\x00"+d.Value] = true
		if depth < maxDepth && g.chance(0.4) {
			d.Descriptors = g.level(depth + 1)
		}
		if g.chance(0.5) || (len(d.Descriptors) == 0 && g.chance(0.8)) {
			d.RateLimit = g.rateLimit()
		}
		d.ShadowMode = g.chance(0.15)
		d.DetailedMetric = g.chance(0.05)
		d.ValueToMetric = g.chance(0.05)
		d.QuotaMode = g.feat.quotaMode && g.chance(0.15)
		d.ShareThreshold = g.feat.shareThreshold && strings.Contains(d.Value, "*") && g.chance(0.5)
		out = append(out, d)
	}
	return out
}

func (g *generator) configValue() string {
	switch p := g.r.Float64(); {
	case p < 0.3:
		return ""
	case p < 0.65:
		return pick(g, literals)
	case g.feat.middleWildcards && p < 0.8:
		return pick(g, middleWilds)
	default:
		return pick(g, prefixWilds)
	}
}

func (g *generator) rateLimit() *rateLimit {
	if g.chance(0.1) {
		return &rateLimit{Unlimited: true, Name: g.limitName()}
	}
	units := baseUnits
	if g.feat.longUnits {
		units = append(slices.Clip(baseUnits), longUnits...)
	}
	perUnit := 1 + uint32(g.r.IntN(8))
	rl := &rateLimit{Unit: pick(g, units), RequestsPerUnit: &perUnit, Name: g.limitName()}
	if g.chance(0.15) {
		perUnit = 100 + uint32(g.r.IntN(1000))
	}
	if g.feat.zeroLimits && g.chance(0.1) {
		perUnit = 0
	}
	return rl
}

// override is a descriptor's limit override: few requests per unit (none
// with zeroLimits), so that counters shared with configured limits, or
// not, show in the remaining counts. WEEK (7) has no name in envoy.type.v3's
// enum, but envoyproxy/ratelimit reads the number as its own unit's.
func (g *generator) override() *ratelimitv3.RateLimitDescriptor_RateLimitOverride {
	units := []typev3.RateLimitUnit{typev3.RateLimitUnit_SECOND, typev3.RateLimitUnit_MINUTE, typev3.RateLimitUnit_HOUR, typev3.RateLimitUnit_DAY}
	if g.feat.longUnits {
		units = append(units, typev3.RateLimitUnit_MONTH, typev3.RateLimitUnit_YEAR, typev3.RateLimitUnit(7))
	}
	o := &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1 + uint32(g.r.IntN(8)), Unit: pick(g, units)}
	if g.feat.zeroLimits && g.chance(0.1) {
		o.RequestsPerUnit = 0
	}
	return o
}

func (g *generator) limitName() string {
	if g.chance(0.35) {
		return pick(g, limitNames)
	}
	return ""
}

// addReplaces makes some limits replace named limits of the same domain
// (never their own name: envoyproxy/ratelimit rejects that).
func (g *generator) addReplaces(f *domainFile) {
	walk(f.Descriptors, func(d *descriptor) {
		if d.RateLimit == nil || !g.chance(0.2) {
			return
		}
		for _, n := range limitNames {
			if n != d.RateLimit.Name && g.chance(0.4) {
				d.RateLimit.Replaces = append(d.RateLimit.Replaces, replaces{Name: n})
			}
		}
	})
}

// request draws one request: mostly aimed at configured descriptors, at
// their depth or shallower or deeper, with unknown keys, empty values,
// unknown domains and hits_addend per request and per descriptor; rarely
// input both services refuse (no domain, no descriptors).
func (g *generator) request(s *scenario) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: pick(g, s.files).Domain}
	switch p := g.r.Float64(); {
	case p < 0.02:
		req.Domain = ""
	case p < 0.06:
		req.Domain = "unknown_domain"
	}
	if g.chance(0.3) {
		req.HitsAddend = uint32(g.r.IntN(4))
	}
	n := 1 + g.r.IntN(3)
	if g.chance(0.02) {
		n = 0
	}
	file := s.fileOf(req.Domain)
	for range n {
		d := &ratelimitv3.RateLimitDescriptor{Entries: g.entries(file)}
		if g.chance(0.2) {
			d.HitsAddend = wrapperspb.UInt64(uint64(g.r.IntN(4)))
		}
		if g.feat.overrides && g.chance(0.25) {
			d.Limit = g.override()
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

func (s *scenario) fileOf(domain string) *domainFile {
	for _, f := range s.files {
		if f.Domain == domain {
			return f
		}
	}
	return s.files[0]
}

// entries walks down a random path of the file's descriptors, stopping
// at a random depth, sometimes going past the config's depth or stepping
// off it with a key the config does not have.
func (g *generator) entries(f *domainFile) []*ratelimitv3.RateLimitDescriptor_Entry {
	var out []*ratelimitv3.RateLimitDescriptor_Entry
	level := f.Descriptors
	for depth := 1; depth <= maxDepth+1; depth++ {
		switch {
		case len(level) == 0 || g.chance(0.08):
			out = append(out, &ratelimitv3.RateLimitDescriptor_Entry{Key: pick(g, append(slices.Clip(keys), "zz")), Value: pick(g, requestValues)})
			level = nil
		default:
			d := pick(g, level)
			out = append(out, &ratelimitv3.RateLimitDescriptor_Entry{Key: d.Key, Value: g.valueFor(d.Value)})
			level = d.Descriptors
		}
		if (len(level) == 0 && g.chance(0.75)) || g.chance(0.2) {
			break
		}
	}
	return out
}

// valueFor is a request value for a configured one: the literal itself
// (mostly), a value that fills each "*" of a wildcard, or any value.
func (g *generator) valueFor(config string) string {
	switch {
	case config == "" || g.chance(0.1):
		return pick(g, requestValues)
	case strings.Contains(config, "*"):
		parts := strings.Split(config, "*")
		var b strings.Builder
		for i, p := range parts {
			if i > 0 {
				b.WriteString(pick(g, wildcardFills))
			}
			b.WriteString(p)
		}
		return b.String()
	}
	return config
}
