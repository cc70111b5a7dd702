package insight

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
)

// The names under which Insight tracks events it cannot file under their
// own policy.
const (
	// NoPolicy is the policy of events that named none (an explicit limit).
	NoPolicy = "_none"
	// OtherPolicy collects the events of every policy beyond MaxPolicies.
	OtherPolicy = "_other"
)

// Insight follows every decision it observes, per policy, and answers who
// is being limited, who is close, and whether something just changed. It
// implements observe.Observer; it is safe for concurrent use. Build one
// with New.
type Insight struct {
	opts       Options
	clock      floodgate.Clock
	wall       bool  // clock is the system's: an event's own Time stands for it
	slotSec    int64 // seconds per sub-interval
	spike      spikeRules
	gap        int64 // maxGap
	nearBudget nearBudget

	policies atomic.Pointer[map[string]*policyState] // copied on write
	mu       sync.Mutex                              // serialises adding a policy
	other    *policyState
	tracked  atomic.Int64 // policies tracked one by one
	// first are the first fewPolicies policies added, found by comparing
	// names before policies is looked up: a map lookup hashes even a
	// short name, and most processes decide under a few policies.
	first atomic.Pointer[[]*policyState]

	events eventRing
}

// New returns an Insight configured by opts, or an error wrapping
// ErrInvalidOption that names the first bad field.
func New(opts Options) (*Insight, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	in := &Insight{
		opts:    o,
		clock:   o.Clock,
		slotSec: int64(o.Window / time.Duration(o.Slots) / time.Second),
		spike:   newSpikeRules(o),
		gap:     maxGap(o),
		events:  eventRing{buf: make([]EventRecord, o.MaxEvents)},
	}
	if in.clock == nil {
		in.clock, in.wall = systemClock{}, true
	}
	in.nearBudget.max = int64(o.MaxNearLimit)
	m := map[string]*policyState{}
	in.policies.Store(&m)
	in.other = in.newPolicy(OtherPolicy, in.clock.Now().UnixNano())
	return in, nil
}

// systemClock is the default clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// fewPolicies is how many policies Insight.first holds.
const fewPolicies = 4

// policyState is everything Insight follows for one policy, behind the
// policy's own lock: the only lock Observe takes.
type policyState struct {
	name string
	mu   sync.Mutex

	sec                   int64 // the current second (Unix)
	nextSec               int64 // when the next second starts (Unix ns): advance has nothing to close before
	secDecisions, secDeny int64 // its counts so far
	recent                [2][]int64
	recentPos             int
	det                   [2]detector // SignalDecisions, SignalDenials

	slot             int64     // the current sub-interval: sec / slotSec
	cur              int64     // its index in the rings: slot % Slots
	admitted, denied []summary // rings of Slots sub-intervals, by slot % Slots

	totals [observe.Error + 1]uint64 // by outcome; [0] is unknown outcomes
	// untimed counts the untimed decisions (observe.Event.Untimed) of the
	// current second by outcome, without the lock; fold adds them to
	// totals and the second's counts. nextSecAt is nextSec, for them to
	// read without the lock.
	untimed [observe.Error + 1]atomic.Int64
	// untimedUnits are their units, admitted and denied, for the top
	// lists' exact totals. An untimed decision that costs more than
	// untimedCost, the largest cost the current sub-interval has counted
	// under the lock, takes the lock: the sampling bound needs it.
	untimedUnits  [2]atomic.Int64
	untimedCost   atomic.Int64
	nextSecAt     atomic.Int64
	nearDecisions uint64
	near          nearList
	pending       []EventRecord // spikes to record once the lock is released
}

func (in *Insight) newPolicy(name string, now int64) *policyState {
	p := &policyState{name: name, sec: now / 1e9}
	p.slot = p.sec / in.slotSec
	p.cur, p.nextSec = p.slot%int64(in.opts.Slots), (p.sec+1)*1e9
	p.nextSecAt.Store(p.nextSec)
	for i := range p.recent {
		p.recent[i] = make([]int64, in.opts.RateWindow/time.Second)
	}
	p.admitted = make([]summary, in.opts.Slots)
	p.denied = make([]summary, in.opts.Slots)
	for i := range p.admitted {
		p.admitted[i] = newSummary(in.opts.Counters)
		p.denied[i] = newSummary(in.opts.Counters)
	}
	p.near.budget = &in.nearBudget
	return p
}

// policy returns name's state, adding it while there is room.
func (in *Insight) policy(name string, now int64) *policyState {
	if name == "" {
		name = NoPolicy
	}
	if first := in.first.Load(); first != nil {
		for _, p := range *first {
			if p.name == name {
				return p
			}
		}
	}
	if p, ok := (*in.policies.Load())[name]; ok {
		return p
	}
	if name == OtherPolicy || in.tracked.Load() >= int64(in.opts.MaxPolicies) {
		return in.other
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	old := *in.policies.Load()
	if p, ok := old[name]; ok {
		return p
	}
	if len(old) >= in.opts.MaxPolicies {
		return in.other
	}
	m := make(map[string]*policyState, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	p := in.newPolicy(strings.Clone(name), now)
	m[p.name] = p
	in.policies.Store(&m)
	in.tracked.Store(int64(len(m)))
	if first := in.first.Load(); first == nil || len(*first) < fewPolicies {
		var list []*policyState
		if first != nil {
			list = *first
		}
		list = append(list[:len(list):len(list)], p)
		in.first.Store(&list)
	}
	return p
}

// Observe counts one decision. It takes the lock of e's policy only, and
// allocates nothing for a key already tracked.
//
// The decision happened at e.Time when the surface gave it and Insight
// runs on the system clock (Options.Clock nil), else at Options.Clock's
// now: a clock of the caller's (a test's, a simulation's) rules, since the
// surfaces read the system's.
//
// An untimed event (observe.Event.Untimed: a Sampler's) that leaves its
// key below NearLimitRatio is counted without the lock, in its policy's
// totals and rates alone: the top consumers count the timed events, each
// for its Weight.
func (in *Insight) Observe(_ context.Context, e observe.Event) {
	if e.Untimed && in.countUntimed(&e) {
		return
	}
	now := in.now(&e)
	p := in.policy(e.Policy, now)
	p.mu.Lock()
	in.advance(p, now)
	in.count(p, &e, now)
	pending := p.takePending()
	p.mu.Unlock()
	in.emit(pending)
}

// now is when e was decided, in Unix nanoseconds (see Observe).
func (in *Insight) now(e *observe.Event) int64 {
	if in.wall && !e.Time.IsZero() {
		return e.Time.UnixNano()
	}
	return in.clock.Now().UnixNano()
}

// countUntimed counts an untimed event that says nothing of the near
// limit in its policy's atomic counters, and reports whether it did: not
// when Insight runs on a clock of its own (which it then reads) or when a
// second is to be closed first, which takes the lock.
func (in *Insight) countUntimed(e *observe.Event) bool {
	if !in.wall || e.Time.IsZero() || in.isNear(e) {
		return false
	}
	now := e.Time.UnixNano()
	p := in.policy(e.Policy, now)
	o := outcomeIndex(e.Outcome)
	units := hasUnits(o) && e.Cost > 0
	if now >= p.nextSecAt.Load() || units && e.Cost > p.untimedCost.Load() {
		return false
	}
	p.untimed[o].Add(1)
	if units {
		p.untimedUnits[unitsIndex(o)].Add(e.Cost)
	}
	return true
}

// hasUnits reports whether the top lists count an outcome's units:
// admitted (Allowed) or denied.
func hasUnits(o observe.Outcome) bool { return o == observe.Allowed || denial(o) }

// unitsIndex is the index of an outcome's units in
// policyState.untimedUnits.
func unitsIndex(o observe.Outcome) int {
	if denial(o) {
		return 1
	}
	return 0
}

// isNear reports whether e leaves its key at or above NearLimitRatio.
func (in *Insight) isNear(e *observe.Event) bool {
	return e.Outcome != observe.Error && e.Decision.Limit > 0 && e.Used() >= in.opts.NearLimitRatio
}

// outcomeIndex is o's index in the arrays by outcome: 0 for an unknown one.
func outcomeIndex(o observe.Outcome) observe.Outcome {
	if o > observe.Error {
		return 0
	}
	return o
}

// fold adds the untimed decisions counted since the last fold to p's
// totals and to the current second's counts. p's lock is held.
func (p *policyState) fold() {
	for o := range p.untimed {
		if c := p.untimed[o].Load(); c != 0 {
			p.untimed[o].Add(-c)
			p.totals[o] += uint64(c)
			p.secDecisions += c
			if denial(observe.Outcome(o)) {
				p.secDeny += c
			}
		}
	}
	for i, s := range [2]*summary{&p.admitted[p.cur], &p.denied[p.cur]} {
		if u := p.untimedUnits[i].Load(); u != 0 {
			p.untimedUnits[i].Add(-u)
			s.fold(u, p.untimedCost.Load())
		}
	}
}

func (p *policyState) takePending() []EventRecord {
	if len(p.pending) == 0 {
		return nil
	}
	out := p.pending
	p.pending = nil
	return out
}

func (in *Insight) emit(recs []EventRecord) {
	for _, r := range recs {
		in.events.add(r, in.opts.OnEvent)
	}
}

// denial reports whether an outcome counts as a denial: the limit refused
// the request, or would have in shadow mode.
func denial(o observe.Outcome) bool { return o == observe.Denied || o == observe.ShadowDenied }

func (in *Insight) count(p *policyState, e *observe.Event, now int64) {
	o := outcomeIndex(e.Outcome)
	p.totals[o]++
	p.secDecisions++
	cur, w := p.cur, e.Weighed() // an untimed event's units are in the timed ones' weights
	switch {
	case denial(o):
		p.secDeny++
		p.denied[cur].count(e.Key, e.Cost, w)
	case o == observe.Allowed:
		p.admitted[cur].count(e.Key, e.Cost, w)
	}
	if hasUnits(o) && e.Cost > p.untimedCost.Load() {
		p.untimedCost.Store(e.Cost)
	}
	if o == observe.Error || e.Decision.Limit <= 0 {
		return // no decision: it says nothing of how close the key is
	}
	used := e.Used()
	near := used >= in.opts.NearLimitRatio
	if !near && e.Untimed {
		return // a key below the ratio leaves on its next timed decision, or at its reset
	}
	if near && o == observe.Allowed {
		p.nearDecisions++
	}
	d := e.Decision
	p.near.note(nearKey{e.Limit, e.Key}, near, used, d.Remaining, d.Limit, now+int64(d.ResetAfter), now)
}

// advance brings p to now: it closes the seconds and sub-intervals that
// have passed and drops the near-limit keys whose limits have reset. A
// clock that goes back counts into the current second.
//
// Within a second it only checks the near-limit keys: the divisions that
// find the second and the sub-interval run once a second, not once per
// decision.
func (in *Insight) advance(p *policyState, now int64) {
	p.fold()
	if now >= p.nextSec {
		in.advanceSecond(p, now)
	}
	p.near.expire(now)
}

func (in *Insight) advanceSecond(p *policyState, now int64) {
	if sec := now / 1e9; sec > p.sec {
		in.closeSeconds(p, sec)
	}
	n := int64(in.opts.Slots)
	if slot := p.sec / in.slotSec; slot > p.slot {
		for s := max(p.slot+1, slot-n+1); s <= slot; s++ {
			p.admitted[s%n].reset()
			p.denied[s%n].reset()
		}
		p.slot = slot
		p.untimedCost.Store(0) // fold has folded the last sub-interval's
	}
	p.cur = p.slot % n
	p.nextSec = (p.sec + 1) * 1e9
	p.nextSecAt.Store(p.nextSec)
}

// closeSeconds feeds the seconds from p.sec to sec (exclusive) to the
// rates and the spike detectors: the current second's counts, then the
// empty seconds of an idle gap (at most maxGap of them).
func (in *Insight) closeSeconds(p *policyState, sec int64) {
	in.closeSecond(p, p.secDecisions, p.secDeny)
	gap := min(sec-p.sec-1, in.gap)
	for i := int64(0); i < gap; i++ {
		p.sec++
		in.closeSecond(p, 0, 0)
	}
	p.sec, p.secDecisions, p.secDeny = sec, 0, 0
}

var signals = [2]string{SignalDecisions, SignalDenials}

func (in *Insight) closeSecond(p *policyState, decisions, denials int64) {
	counts := [2]int64{decisions, denials}
	for i := range signals {
		p.recent[i][p.recentPos] = counts[i]
		if n, ok := in.spike.feed(&p.det[i], float64(counts[i])); ok {
			at := time.Unix(p.sec+1, 0).UTC() // the second's end: when it was seen
			p.pending = append(p.pending, EventRecord{Time: at, Event: spikeEvent(p.name, signals[i], n)})
		}
	}
	p.recentPos = (p.recentPos + 1) % len(p.recent[0])
}
