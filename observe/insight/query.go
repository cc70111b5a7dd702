package insight

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/floodgate-io/floodgate/observe"
)

// The errors of a bad query; Handler answers them 400 and 404.
var (
	ErrInvalidQuery  = errors.New("insight: invalid query")
	ErrUnknownPolicy = errors.New("insight: unknown policy")
)

// By chooses what the top consumers are ranked by.
type By string

// The rankings.
const (
	// ByAdmitted ranks keys by the units their Allowed decisions admitted.
	ByAdmitted By = "admitted"
	// ByDenied ranks keys by the units the limit refused them: Denied, and
	// ShadowDenied (what a shadow limit would have refused).
	ByDenied By = "denied"
)

// TopEntry is one key of a top list: its true count over the window lies
// between Count − Error and Count + ErrorAbove. ErrorAbove is 0 and the
// bounds certain unless the list was sampled (TopList.SamplingPeriod
// above 1); then both include the sampling error, and they hold with
// probability 1 − 10⁻⁶ (see the package doc).
type TopEntry struct {
	Key        string `json:"key"`
	Count      int64  `json:"count"`
	Error      int64  `json:"error"`
	ErrorAbove int64  `json:"error_above"`
}

// TopList is a policy's top consumers over the window.
type TopList struct {
	Policy string `json:"policy"`
	By     By     `json:"by"`
	// WindowSeconds is Options.Window; the list covers the current
	// sub-interval and the Slots−1 before it.
	WindowSeconds int64 `json:"window_seconds"`
	// Total is the units of every decision over the window, exactly,
	// sampled or not.
	Total int64 `json:"total"`
	// Sampled is N, the units the summaries counted: Total, unless the
	// decisions were sampled; then the timed decisions' units, each
	// times its Weight, an unbiased estimate of Total.
	Sampled int64 `json:"sampled"`
	// SamplingPeriod is the largest Weight over the window: one decision
	// in SamplingPeriod was counted. 1: every decision was.
	SamplingPeriod int64 `json:"sampling_period"`
	// Counters is K.
	Counters int `json:"counters"`
	// MaxError is N/K, the bound on the Space-Saving part of every
	// entry's Error: all of it unless the list was sampled.
	MaxError int64      `json:"max_error"`
	Entries  []TopEntry `json:"entries"`
}

// Policies lists the policies tracked, by name, OtherPolicy last if any
// event went there.
func (in *Insight) Policies() []string {
	var out []string
	for _, p := range in.states() {
		out = append(out, p.name)
	}
	return out
}

func (in *Insight) states() []*policyState {
	m := *in.policies.Load()
	out := make([]*policyState, 0, len(m)+1)
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *policyState) int { return cmp.Compare(a.name, b.name) })
	in.other.mu.Lock()
	in.other.fold()
	used := in.other.totals != [len(in.other.totals)]uint64{}
	in.other.mu.Unlock()
	if used {
		out = append(out, in.other)
	}
	return out
}

func (in *Insight) state(policy string) (*policyState, error) {
	if p, ok := (*in.policies.Load())[policy]; ok {
		return p, nil
	}
	if policy == OtherPolicy {
		return in.other, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownPolicy, policy)
}

// read brings p to the clock's time and calls f under its lock.
func (in *Insight) read(p *policyState, f func(now int64)) {
	now := in.clock.Now().UnixNano()
	p.mu.Lock()
	in.advance(p, now)
	f(now)
	pending := p.takePending()
	p.mu.Unlock()
	in.emit(pending)
}

// Top returns policy's n (1 to Options.Counters) heaviest keys over the
// window, by admitted or denied units, heaviest first.
func (in *Insight) Top(policy string, by By, n int) (TopList, error) {
	if by != ByAdmitted && by != ByDenied {
		return TopList{}, fmt.Errorf("%w: by %q, want %q or %q", ErrInvalidQuery, by, ByAdmitted, ByDenied)
	}
	if n < 1 || n > in.opts.Counters {
		return TopList{}, fmt.Errorf("%w: n %d, want 1 to %d", ErrInvalidQuery, n, in.opts.Counters)
	}
	p, err := in.state(policy)
	if err != nil {
		return TopList{}, err
	}
	var m merged
	in.read(p, func(int64) {
		ring := p.admitted
		if by == ByDenied {
			ring = p.denied
		}
		parts := make([]*summary, len(ring))
		for i := range ring {
			parts[i] = &ring[i]
		}
		m = merge(parts)
	})
	l := TopList{Policy: p.name, By: by, WindowSeconds: int64(in.opts.Window / time.Second), Total: m.exact,
		Sampled: m.total, SamplingPeriod: m.period, Counters: in.opts.Counters, MaxError: m.total / int64(in.opts.Counters),
		Entries: m.entries[:min(n, len(m.entries))]}
	b := newSamplingBound(m.period, m.cost)
	for i := range l.Entries {
		l.Entries[i].Key = in.showKey(l.Entries[i].Key)
		b.widen(&l.Entries[i])
	}
	return l, nil
}

// NearEntry is a key whose last decision left it at or above the
// near-limit ratio of one of its policy's limits.
type NearEntry struct {
	Policy string `json:"policy"`
	// Limit names the limit within the policy (observe.Event.Limit).
	Limit string `json:"limit"`
	Key   string `json:"key"`
	// Used is the share of the limit used, 0 to 1.
	Used float64 `json:"used"`
	// Remaining and Max are the decision's Remaining and Limit.
	Remaining int64 `json:"remaining"`
	Max       int64 `json:"max"`
	// ResetAt is when the key is back to its full limit, if nothing else
	// comes; it leaves the list then.
	ResetAt time.Time `json:"reset_at"`
	// SeenAt is the time of its last decision.
	SeenAt time.Time `json:"seen_at"`
}

// NearLimit returns up to n (1 to Options.MaxNearLimit) near-limit keys,
// of policy or of every policy when policy is AllPolicies, the most used
// first.
func (in *Insight) NearLimit(policy string, n int) ([]NearEntry, error) {
	if n < 1 || n > in.opts.MaxNearLimit {
		return nil, fmt.Errorf("%w: n %d, want 1 to %d", ErrInvalidQuery, n, in.opts.MaxNearLimit)
	}
	states := in.states()
	if policy != AllPolicies {
		p, err := in.state(policy)
		if err != nil {
			return nil, err
		}
		states = []*policyState{p}
	}
	out := []NearEntry{}
	for _, p := range states {
		in.read(p, func(int64) {
			for _, e := range p.near.heap {
				out = append(out, NearEntry{Policy: p.name, Limit: e.limit, Key: e.key, Used: e.used,
					Remaining: e.remaining, Max: e.max, ResetAt: time.Unix(0, e.resetAt).UTC(), SeenAt: time.Unix(0, e.seenAt).UTC()})
			}
		})
	}
	slices.SortFunc(out, func(a, b NearEntry) int {
		return cmp.Or(cmp.Compare(b.Used, a.Used), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Key, b.Key))
	})
	out = out[:min(n, len(out))]
	for i := range out {
		out[i].Key = in.showKey(out[i].Key)
	}
	return out, nil
}

// AllPolicies asks NearLimit for the keys of every policy.
const AllPolicies = ""

// Events returns up to n (1 to Options.MaxEvents) of the recent events at
// or after since, newest first. A zero since means all.
func (in *Insight) Events(since time.Time, n int) ([]EventRecord, error) {
	if n < 1 || n > in.opts.MaxEvents {
		return nil, fmt.Errorf("%w: n %d, want 1 to %d", ErrInvalidQuery, n, in.opts.MaxEvents)
	}
	for _, p := range in.states() {
		in.read(p, func(int64) {}) // a spike may just have ended
	}
	return in.events.last(since, n), nil
}

// PolicyStats is one policy's live view.
type PolicyStats struct {
	Policy string `json:"policy"`
	// DecisionsPerSecond and DenialsPerSecond average the last
	// Options.RateWindow of complete seconds.
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	DenialsPerSecond   float64 `json:"denials_per_second"`
	// Baseline is the spike detectors' baseline mean, per second, by
	// signal; Spiking lists the signals in a spike now.
	Baseline map[string]float64 `json:"baseline"`
	Spiking  []string           `json:"spiking"`
	// Totals counts the decisions since the start, by outcome name.
	Totals map[string]uint64 `json:"totals"`
	// NearLimitDecisions counts the Allowed decisions that left their key
	// at or above the near-limit ratio (envoyproxy/ratelimit's near_limit).
	NearLimitDecisions uint64 `json:"near_limit_decisions"`
	// NearLimitKeys is how many of its keys are on the near-limit list.
	NearLimitKeys int `json:"near_limit_keys"`
}

// Stats is the live view of every policy.
type Stats struct {
	Time     time.Time     `json:"time"`
	Policies []PolicyStats `json:"policies"`
	// NearLimitKeys is the near-limit list's size over every policy;
	// NearLimitDropped counts the keys it had no room for.
	NearLimitKeys    int64 `json:"near_limit_keys"`
	NearLimitDropped int64 `json:"near_limit_dropped"`
	// Events counts the events recorded since the start.
	Events uint64 `json:"events"`
}

// Stats returns the live view.
func (in *Insight) Stats() Stats {
	s := Stats{Time: in.clock.Now().UTC(), Policies: []PolicyStats{}}
	for _, p := range in.states() {
		in.read(p, func(int64) { s.Policies = append(s.Policies, in.policyStats(p)) })
	}
	s.NearLimitKeys, s.NearLimitDropped = in.nearBudget.used.Load(), in.nearBudget.dropped.Load()
	in.events.mu.Lock()
	s.Events = in.events.next
	in.events.mu.Unlock()
	return s
}

func (in *Insight) policyStats(p *policyState) PolicyStats {
	ps := PolicyStats{Policy: p.name, Baseline: map[string]float64{}, Spiking: []string{}, Totals: map[string]uint64{},
		NearLimitDecisions: p.nearDecisions, NearLimitKeys: len(p.near.heap)}
	window := float64(len(p.recent[0]))
	rates := [2]*float64{&ps.DecisionsPerSecond, &ps.DenialsPerSecond}
	for i, sig := range signals {
		var sum int64
		for _, c := range p.recent[i] {
			sum += c
		}
		*rates[i] = round(float64(sum) / window)
		ps.Baseline[sig] = round(p.det[i].mean)
		if p.det[i].inSpike {
			ps.Spiking = append(ps.Spiking, sig)
		}
	}
	for _, o := range observe.Outcomes() {
		ps.Totals[o.String()] = p.totals[o]
	}
	if p.totals[0] > 0 {
		ps.Totals["unknown"] = p.totals[0]
	}
	return ps
}

// showKey is key as the queries show it: raw, or hashed under
// Options.HashKeys.
func (in *Insight) showKey(key string) string {
	if !in.opts.HashKeys {
		return key
	}
	return observe.KeyHash(key)
}
