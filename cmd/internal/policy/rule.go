package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// Entry is one (key, value) pair of a request's descriptor.
type Entry struct{ Key, Value string }

// Descriptor is what a request is limited by: an ordered list of entries,
// such as (tenant=acme), (user=42). A request may carry several.
type Descriptor struct{ Entries []Entry }

// String renders the descriptor as "(tenant=acme),(user=42)".
func (d Descriptor) String() string {
	var b strings.Builder
	for i, e := range d.Entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		b.WriteString(e.Key)
		b.WriteByte('=')
		b.WriteString(e.Value)
		b.WriteByte(')')
	}
	return b.String()
}

// Strategy says how the nodes of a fleet share one limit.
type Strategy string

// The strategies. A rule without one leaves the choice to the service.
const (
	// StrategyExact decides every request against the shared store: one
	// exact count for the whole fleet.
	StrategyExact Strategy = "exact"
	// StrategyLocal enforces limit/N on each node, in memory.
	StrategyLocal Strategy = "local"
	// StrategyLeased serves from leases of quota taken from a budget in
	// Redis, redistributed by demand every sync interval.
	StrategyLeased Strategy = "leased"
	// StrategySynced counts locally and syncs the global total with Redis
	// every sync interval.
	StrategySynced Strategy = "synced"
	// StrategySampled updates the shared counter with probability p by 1/p.
	StrategySampled Strategy = "sampled"
	// StrategyGossip spreads per-window G-counters between the nodes with
	// memberlist; no Redis.
	StrategyGossip Strategy = "gossip"
)

// ParseStrategy reads a strategy's name, or says which names there are.
func ParseStrategy(s string) (Strategy, error) {
	if !slices.Contains(Strategies(), Strategy(s)) {
		return "", fmt.Errorf("unknown strategy %q (want one of %s)", s, StrategyNames())
	}
	return Strategy(s), nil
}

// Strategies lists the strategies a rate_limit may name; package cluster
// implements them and documents each one's error bound.
func Strategies() []Strategy {
	return []Strategy{StrategyExact, StrategyLocal, StrategyLeased, StrategySynced, StrategySampled, StrategyGossip}
}

// StrategyNames lists the strategies' names for messages: "exact, local, ...".
func StrategyNames() string {
	names := make([]string, 0, len(Strategies()))
	for _, s := range Strategies() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// Counts says what a limit counts: the units of a request's cost, or the
// requests themselves. A descriptor with requests per minute and tokens per
// minute has one limit of each.
type Counts string

// The two kinds of limit.
const (
	// CountsUnits charges a limit the request's cost: Envoy's hits_addend,
	// the cost of /v1/allow or of a route (tokens, bytes, or 1 per request
	// when the cost is 1). It is the default, which keeps envoyproxy/ratelimit
	// configurations counting as Envoy's service counts them: their one limit
	// takes hits_addend.
	CountsUnits Counts = "units"
	// CountsRequests charges a limit 1 per request whatever its cost; a read
	// (cost 0) reads it without counting, as it reads a units limit.
	CountsRequests Counts = "requests"
)

// CountsKinds lists what a rate_limit's counts may say.
func CountsKinds() []Counts { return []Counts{CountsRequests, CountsUnits} }

// Rule is one limit that applies to a descriptor. Rules come from a [Set],
// which shares them between callers: treat them, their slices and their
// maps as read-only.
type Rule struct {
	// Name is the rate_limit's name, "" if it has none. Replaces and the
	// response headers refer to limits by name.
	Name string
	// Limit is what to enforce. Zero when Unlimited. A Rate of 0 denies
	// every request (see DeniesAll) and is the one Limit that does not
	// pass Limit.Validate.
	Limit floodgate.Limit
	// Unlimited rules never limit: the descriptor is known and allowed.
	Unlimited bool
	// Counts is what the limit counts: CountsUnits unless the rate_limit
	// says counts: requests; "" for an unlimited rule. A Rule built by hand
	// with "" counts units.
	Counts Counts
	// ShadowMode rules are counted and reported but never deny.
	ShadowMode bool
	// QuotaMode rules are soft limits: exceeding one is reported to the
	// caller, who may route elsewhere, and the request is allowed.
	QuotaMode bool
	// DetailedMetric and the value_to_metric of the descriptors on the way
	// shape MetricKey.
	DetailedMetric bool
	// FailureMode is what to do when the shared store cannot answer; ""
	// leaves it to the service.
	FailureMode failover.Mode
	// Strategy is how the fleet shares the limit; "" leaves it to the service.
	Strategy Strategy
	// StrategyParams tune the strategy for this limit; zero fields take the
	// service's settings.
	StrategyParams StrategyParams
	// Replaces names the limits this one replaces when both apply to one
	// request (see Set.MatchAll).
	Replaces []string
	// Metadata is the descriptor's metadata mapping, nil if none.
	Metadata map[string]any

	// Domain is the domain the rule belongs to.
	Domain string
	// Path is the descriptor's place in the tree as Envoy names it in
	// metrics: the domain, then key or key_value per level, joined by dots,
	// with wildcard values as written: "api.tenant_free.user".
	Path string
	// Index is the rule's position among its descriptor's limits (0 for a
	// rate_limit, the list index for rate_limits); Count is how many there are.
	Index, Count int
	// File and Line are where the limit is written.
	File string
	Line int

	steps []step // the descriptors matched, one per entry, from the root
}

// step is one level of the path to a rule: how an entry at that depth is
// matched.
type step struct {
	key, value    string // value "" for a key-only descriptor
	wildcard      bool   // value has a "*"
	share         bool   // share_threshold: every matching value shares a counter
	valueToMetric bool
}

// DeniesAll reports whether the rule denies every request: a
// requests_per_unit of 0, Envoy's way to block a value.
func (r Rule) DeniesAll() bool { return !r.Unlimited && r.Limit.Rate == 0 }

// StateKey is the key a store counts this rule under for the request
// descriptor d, the one the rule was matched for. It is the domain, then
// key=value for each entry with the request's own values, so that a
// key-only or wildcard descriptor counts each distinct value apart, as
// Envoy does; a wildcard with share_threshold puts its pattern instead of
// the value, so that all the values it matches share one count. When the
// descriptor has several limits, "#index" tells them apart. Components are
// escaped so that different inputs never give the same key:
//
//	api/tenant=acme/user=42
//	api/path=%2Ffiles%2F*#1
func (r Rule) StateKey(d Descriptor) string {
	var b strings.Builder
	b.Grow(len(r.Domain) + 16*len(d.Entries))
	escapeTo(&b, r.Domain)
	for i, e := range d.Entries {
		b.WriteByte('/')
		escapeTo(&b, e.Key)
		b.WriteByte('=')
		if i < len(r.steps) && r.steps[i].share {
			escapeTo(&b, r.steps[i].value)
		} else {
			escapeTo(&b, e.Value)
		}
	}
	if r.Count > 1 {
		b.WriteByte('#')
		b.WriteString(strconv.Itoa(r.Index))
	}
	return b.String()
}

// PerValueMetric reports whether the rule's metric names carry the
// request's values (detailed_metric, or value_to_metric on one of its
// steps). Without them MetricKey is always Path, so a caller that only
// needs the name can skip building it.
func (r Rule) PerValueMetric() bool {
	if r.DetailedMetric {
		return true
	}
	for _, s := range r.steps {
		if s.valueToMetric {
			return true
		}
	}
	return false
}

// MetricKey is the name Envoy's service gives this rule's statistics for
// the request descriptor d: Path, except that the descriptors with
// value_to_metric put the request's value in place of their own, and a rule
// with detailed_metric puts every entry's value ("api.tenant_acme.user_42").
// Wildcards with share_threshold keep their pattern.
func (r Rule) MetricKey(d Descriptor) string {
	var b strings.Builder
	b.WriteString(r.Domain)
	for i, e := range d.Entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		value := e.Value
		if i < len(r.steps) {
			s := r.steps[i]
			switch {
			case s.share:
				value = s.value
			case r.DetailedMetric, s.valueToMetric:
			case s.wildcard:
				value = s.value
			case s.value == "":
				value = ""
			}
		}
		if value != "" {
			b.WriteByte('_')
			b.WriteString(value)
		}
	}
	return b.String()
}

// OverrideLabel is the MetricLabel of a limit given in the request
// (Envoy's per-descriptor override), which no rule of the policy names.
const OverrideLabel = "_override"

// MetricLabel names this rule in metrics and reports for the request
// descriptor d: the rule's name, else its path (with "#index" when its
// descriptor has several limits); with the request's values when the
// policy asks for them (detailed_metric, value_to_metric: MetricKey, then
// "/name" or "#index"). Only those per-value labels depend on the request
// (perValue is true): whoever exports them must bound how many distinct
// ones it keeps. A rule without a path (an override) is OverrideLabel.
func (r Rule) MetricLabel(d Descriptor) (label string, perValue bool) {
	if r.Path == "" {
		return OverrideLabel, false
	}
	base := r.Name
	if base == "" {
		base = r.Path
		if r.Count > 1 {
			base += "#" + strconv.Itoa(r.Index)
		}
	}
	if !r.PerValueMetric() {
		return base, false // MetricKey would be Path: nothing to build per decision
	}
	key := r.MetricKey(d)
	if !r.DetailedMetric && key == r.Path {
		return base, false
	}
	if r.Name != "" {
		key += "/" + r.Name
	} else if r.Count > 1 {
		key += "#" + strconv.Itoa(r.Index)
	}
	return key, true
}

// escapeTo writes s with %, /, = and # percent-encoded.
func escapeTo(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "%/=#") {
		b.WriteString(s)
		return
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '/', '=', '#':
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
}

// StrategyParams are a strategy's settings for one limit, given as
// `strategy: {name: synced, interval: 250ms}`.
type StrategyParams struct {
	// Interval is T, how often leased, synced and gossip sync.
	Interval time.Duration
	// OneIn makes sampled update the shared counter for 1 in OneIn admitted
	// requests.
	OneIn int64
}
