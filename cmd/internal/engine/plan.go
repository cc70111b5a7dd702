package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// item is one limit to decide for one descriptor.
type item struct {
	desc   int
	status *LimitStatus // in plan.statuses
	cost   int64
	shadow bool  // shadow or quota mode: reported, never denies
	denies bool  // requests_per_unit 0: decided by decideDenying, in no group
	adjust int64 // −1 gives cost back (is_negative_hits), +1 charges it regardless; 0 decides
}

// plan is a request turned into items, decided in groups.
type plan struct {
	req   Request
	items []item
	// statuses are the items' statuses, in the same order: descriptor by
	// descriptor, so that the response's Limits are slices of it rather
	// than copies. Sized once, so that the items' pointers stay valid.
	statuses  []LimitStatus
	unlimited uint64 // bit i: descriptor i matched an unlimited rule (MaxDescriptors is 64)
}

// A plan's unlimited bits must cover every descriptor a request may have.
var _ [64 - MaxDescriptors]struct{}

func newPlan(req Request, descs []policy.Descriptor, set *policy.Set, rules [][]policy.Rule, sc *scratch) plan {
	n := 0 // at most one item per rule, or one for an override
	for i := range req.Descriptors {
		n += max(len(rules[i]), 1)
	}
	p := plan{req: req, items: sc.itemsFor(n), statuses: sc.statusesFor(n)}
	_, known := set.Policy(req.Domain)
	for i := range req.Descriptors {
		d := &req.Descriptors[i]
		cost := req.Hits
		if cost == 0 {
			cost = 1
		}
		if d.Hits > 0 || d.HitsSet {
			cost = d.Hits
		}
		dir := adjustOf(d)
		if d.Override != nil && known { // Envoy applies an override whatever the tree says
			rule := policy.Rule{Domain: req.Domain, Limit: *d.Override, Count: 1}
			key := overrideKey(set, req.Domain, descs[i], *d.Override)
			p.add(item{desc: i, cost: cost, adjust: dir, denies: d.Override.Rate == 0 && dir == 0},
				LimitStatus{Rule: rule, Limit: *d.Override, Key: key, Cost: signed(dir, cost)})
			continue
		}
		for _, r := range rules[i] {
			if r.Unlimited {
				p.unlimited |= 1 << i
				continue
			}
			c := costOf(&req, d, &r, cost)
			p.add(item{
				desc:   i,
				cost:   c,
				shadow: r.ShadowMode || r.QuotaMode,
				denies: r.DeniesAll() && dir == 0,
				adjust: dir,
			}, LimitStatus{Rule: r, Limit: r.Limit, Key: r.StateKey(descs[i]), Cost: signed(dir, c)})
		}
	}
	sc.items, sc.statuses = p.items, p.statuses // what to clear when sc is put back
	return p
}

// add appends it with its status st. newPlan sized statuses for every
// item, so appending never moves them.
func (p *plan) add(it item, st LimitStatus) {
	p.statuses = append(p.statuses, st)
	it.status = &p.statuses[len(p.statuses)-1]
	p.items = append(p.items, it)
}

// checkKeys holds the keys the entries compose to floodgate.MaxKeyBytes
// before any store is asked, so that a request is refused whole (an
// ErrBadRequest wrapping floodgate.ErrKeyTooLong), not half decided.
func (p *plan) checkKeys() error {
	for _, it := range p.items {
		if err := floodgate.CheckLength("key", it.status.Key, floodgate.MaxKeyBytes); err != nil {
			return fmt.Errorf("%w: descriptor %d: %w", ErrBadRequest, it.desc, err)
		}
	}
	return nil
}

// costOf is what limit r takes of descriptor d, whose cost is cost: the
// cost the request gives r by name, else the cost when r counts units,
// else 1 (0 for a read) when it counts requests, which a Refund or Charge
// moves by d.Requests.
func costOf(req *Request, d *Descriptor, r *policy.Rule, cost int64) int64 {
	if r.Name != "" {
		if c, ok := d.Costs[r.Name]; ok {
			return c
		}
		if c, ok := req.Costs[r.Name]; ok {
			return c
		}
	}
	switch {
	case r.Counts != policy.CountsRequests:
		return cost
	case d.Refund || d.Charge:
		return d.Requests
	}
	return min(cost, 1)
}

// signed is a cost as LimitStatus.Cost reports it: negative for a refund.
func signed(dir, cost int64) int64 {
	if dir < 0 {
		return -cost
	}
	return cost
}

// overrideKey is the key a limit override o of descriptor d counts under.
// Envoy's service counts a descriptor's limit under the domain, the
// entries' values and the window, whichever limit it is, the configured
// one or an override: so an override shares its count with the configured
// limit the same entries match when that limit counts the same window under
// the entries' own values (no share_threshold), and with the overrides of
// the same window on the same entries. It takes that limit's key then, and
// otherwise one of the entries and the window's length, which no configured
// limit has. (Envoy's service also gives windows of different lengths one
// key whenever they start at the same second; they stay apart here.)
func overrideKey(set *policy.Set, domain string, d policy.Descriptor, o floodgate.Limit) string {
	own := policy.Rule{Domain: domain}.StateKey(d)
	rules, _ := set.Match(domain, d)
	for _, r := range rules {
		if !r.Unlimited && r.Limit.Algorithm == o.Algorithm && r.Limit.Period == o.Period && r.StateKey(d) == own {
			return own
		}
	}
	return domain + "/!override/" + escapeDescriptor(d) + "/" + o.Period.String()
}

// escapeDescriptor renders entries so that different descriptors never
// give the same key.
func escapeDescriptor(d policy.Descriptor) string {
	var b strings.Builder
	for i, e := range d.Entries {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(e.Key, "%", "%25"), "/", "%2F"))
		b.WriteByte('=')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(e.Value, "%", "%25"), "/", "%2F"))
	}
	return b.String()
}

// run decides every item: shadow ones each on its own, the enforcing ones
// all or nothing per descriptor (or across descriptors with Atomic).
func (p *plan) run(ctx context.Context, stores Stores) error {
	blocked := p.req.Atomic && p.deniesAll()
	var buf [8]*item // a group's members; most groups are small
	for i := range p.items {
		if it := &p.items[i]; it.denies && it.adjust == 0 {
			// In its turn: its hits count where a later limit may read them.
			if err := decideDenying(ctx, stores, it, p.req.CountDenied); err != nil {
				return err
			}
			continue
		}
		g := p.group(i, buf[:0])
		if len(g) == 0 {
			continue
		}
		if blocked && !g[0].shadow {
			if err := peekGroup(ctx, stores, g); err != nil {
				return err
			}
			continue
		}
		if err := decideGroup(ctx, stores, g); err != nil {
			return err
		}
		if p.req.CountDenied {
			chargeDenied(ctx, stores, g)
		}
	}
	for i := range p.items {
		if it := &p.items[i]; it.adjust != 0 {
			if err := adjust(ctx, stores, it); err != nil {
				return err
			}
		}
	}
	return nil
}

// group appends to g the items of the group item i opens, if it opens one,
// and returns g. A shadow item is a group of its own. Enforcing items come
// in descriptor order, so those of one slot (the descriptor, or the whole
// request with Atomic) are contiguous but for the shadow and other items
// between them: item i opens a group when the enforcing item before it is
// of another slot, and the group runs to the next enforcing item of another
// slot. Adjusting items are moved after the rest (see adjust), and items
// with a limit of 0 are decided on their own (decideDenying).
func (p *plan) group(i int, g []*item) []*item {
	it := &p.items[i]
	switch {
	case it.adjust != 0 || it.denies:
		return g
	case it.shadow:
		return append(g, it)
	}
	slot := p.slot(it)
	for j := i - 1; j >= 0; j-- {
		if prev := &p.items[j]; prev.enforcing() {
			if p.slot(prev) == slot {
				return g // an earlier item opened this group
			}
			break
		}
	}
	for j := i; j < len(p.items); j++ {
		if next := &p.items[j]; next.enforcing() {
			if p.slot(next) != slot {
				break
			}
			g = append(g, next)
		}
	}
	return g
}

// enforcing reports whether an item is decided in a group that can deny.
func (it *item) enforcing() bool { return it.adjust == 0 && !it.denies && !it.shadow }

// slot is what an enforcing item's group is all or nothing over: its
// descriptor, or the whole request (−1) with Atomic.
func (p *plan) slot(it *item) int {
	if p.req.Atomic {
		return -1
	}
	return it.desc
}

// chargeDenied counts the hits of the items whose limits were asked and
// denied them (Request.CountDenied). The decisions stand as made: the
// charge only moves the counts the next requests see, so a store that
// fails it (unavailable, or unable to adjust) changes no answer.
func chargeDenied(ctx context.Context, stores Stores, items []*item) {
	for _, it := range items {
		if it.status.Decision.Allowed || it.cost <= 0 {
			continue
		}
		if a, ok := stores.For(it.status.Rule).(floodgate.Adjuster); ok {
			_ = a.Adjust(ctx, it.status.Key, it.status.Limit, it.cost)
		}
	}
}

// decideDenying decides an item whose limit is 0: of another algorithm,
// denied outright; of a fixed window, as Envoy's service decides
// requests_per_unit 0, which it counts like any limit: over the limit, but
// for a read (cost 0) of a window nothing was counted in; with countDenied
// its hits are counted in the window, where a limit that shares its key (an
// override of the same window) sees them. A store cannot count under a
// limit of 0, so it is asked under a limit of 1 of the same window: the
// count does not depend on the limit, and a read of it finds 1 left exactly
// when nothing is counted.
func decideDenying(ctx context.Context, stores Stores, it *item, countDenied bool) error {
	if it.status.Limit.Algorithm != floodgate.FixedWindow { // nothing to count: denied outright
		it.status.Decision = floodgate.Decision{RetryAfter: -1, ResetAfter: it.status.Limit.Period}
		return nil
	}
	store := stores.For(it.status.Rule)
	one := it.status.Limit
	one.Rate = 1
	over := floodgate.Decision{RetryAfter: -1, ResetAfter: one.Period}
	if it.cost > 0 {
		if a, ok := store.(floodgate.Adjuster); ok && countDenied {
			_ = a.Adjust(ctx, it.status.Key, one, it.cost) // best effort, as chargeDenied
		}
		it.status.Decision = over
		return nil
	}
	d, err := store.AllowN(ctx, it.status.Key, one, 0)
	if err != nil {
		return fmt.Errorf("reading %s: %w", excerpt.Quote(it.status.Key), err)
	}
	it.status.Decision = over
	if d.Remaining == 1 {
		it.status.Decision = floodgate.Decision{Allowed: true}
	}
	return nil
}

// adjustOf is how a descriptor moves its limits' counts: −1 refunds, +1
// charges, 0 decides.
func adjustOf(d *Descriptor) int64 {
	switch {
	case d.Refund:
		return -1
	case d.Charge:
		return 1
	}
	return 0
}

// adjust gives an item's cost back or charges it, and reads what remains.
// An item with nothing to move (a requests limit under a correction of
// units) is only read.
func adjust(ctx context.Context, stores Stores, it *item) error {
	store := stores.For(it.status.Rule)
	var err error
	if it.cost != 0 {
		adjuster, ok := store.(floodgate.Adjuster)
		if !ok {
			return fmt.Errorf("%w: adjusting %s: the store (%T) cannot give hits back or charge them", ErrUnsupported, excerpt.Quote(it.status.Key), store)
		}
		err = adjuster.Adjust(ctx, it.status.Key, it.status.Limit, it.adjust*it.cost)
	}
	switch {
	case errors.Is(err, floodgate.ErrStoreUnavailable):
		// Nothing was adjusted; the read below answers as the store's
		// failure policy says, as a decision would.
	case err != nil:
		return fmt.Errorf("adjusting %s: %w", excerpt.Quote(it.status.Key), err)
	}
	d, err := store.AllowN(ctx, it.status.Key, it.status.Limit, 0)
	if err != nil {
		return fmt.Errorf("reading %s: %w", excerpt.Quote(it.status.Key), err)
	}
	// What was adjusted has happened: the request is not refused, whatever
	// the count now says (a charge may leave it past the limit).
	d.Allowed, d.RetryAfter = true, 0
	it.status.Decision = d
	return nil
}

// deniesAll reports whether an enforcing limit denies every request.
func (p *plan) deniesAll() bool {
	for _, it := range p.items {
		if it.denies && !it.shadow {
			return true
		}
	}
	return false
}

// peekGroup reports items of an atomic request that another limit denies
// outright: nothing is consumed, and they are not to blame.
func peekGroup(ctx context.Context, stores Stores, items []*item) error {
	for _, it := range items {
		d, err := stores.For(it.status.Rule).AllowN(ctx, it.status.Key, it.status.Limit, 0)
		if err != nil {
			return fmt.Errorf("reading %s: %w", excerpt.Quote(it.status.Key), err)
		}
		d.Allowed = false
		it.status.Decision = d
	}
	return nil
}

// decideGroup decides items all or nothing when they share a store that
// batches; items in different stores are decided one store after another.
func decideGroup(ctx context.Context, stores Stores, items []*item) error {
	if len(items) == 1 {
		it := items[0]
		d, err := stores.For(it.status.Rule).AllowN(ctx, it.status.Key, it.status.Limit, it.cost)
		if err != nil {
			return fmt.Errorf("deciding %s: %w", excerpt.Quote(it.status.Key), err)
		}
		it.status.Decision = d
		return nil
	}
	if s, ok := oneStore(stores, items); ok {
		return decideBatch(ctx, s, items) // the usual case: no grouping to build
	}
	byStore := map[floodgate.Limiter][]*item{}
	var order []floodgate.Limiter
	for _, it := range items {
		s := stores.For(it.status.Rule)
		if _, ok := byStore[s]; !ok {
			order = append(order, s)
		}
		byStore[s] = append(byStore[s], it)
	}
	for _, s := range order {
		if err := decideBatch(ctx, s, byStore[s]); err != nil {
			return err
		}
	}
	return nil
}

// oneStore returns the store of items when they all count in the same one.
func oneStore(stores Stores, items []*item) (floodgate.Limiter, bool) {
	first := stores.For(items[0].status.Rule)
	for _, it := range items[1:] {
		if stores.For(it.status.Rule) != first {
			return nil, false
		}
	}
	return first, true
}

func decideBatch(ctx context.Context, store floodgate.Limiter, items []*item) error {
	batcher, ok := store.(floodgate.BatchLimiter)
	if !ok {
		return fmt.Errorf("store %T cannot decide several limits at once", store)
	}
	reqs := make([]floodgate.Request, len(items))
	for i, it := range items {
		reqs[i] = floodgate.Request{Key: it.status.Key, Limit: it.status.Limit, Cost: it.cost}
	}
	ds, err := batcher.AllowAll(ctx, reqs)
	if err != nil {
		return fmt.Errorf("deciding %d limits of %s: %w", len(items), excerpt.Quote(items[0].status.Key), err)
	}
	for i, it := range items {
		it.status.Decision = ds[i]
	}
	return nil
}

// response folds the items into statuses. Each descriptor's Limits is
// the run of plan.statuses of its items.
func (p *plan) response(sc *scratch) Response {
	resp := Response{Code: OK, Descriptors: sc.answersFor(len(p.req.Descriptors)), scratch: sc}
	for i := range resp.Descriptors {
		resp.Descriptors[i] = DescriptorStatus{Code: OK, Tightest: -1, Unlimited: p.unlimited&(1<<i) != 0}
	}
	first := 0 // index in statuses of the first item of the current descriptor
	for k, it := range p.items {
		ds := &resp.Descriptors[it.desc]
		if len(ds.Limits) == 0 {
			first = k
		}
		d := it.status.Decision
		switch {
		case blamed(d) && it.shadow:
			ds.ShadowDenied = true
		case blamed(d):
			ds.Code, resp.Code = OverLimit, OverLimit
		case !d.Allowed && p.req.Atomic:
			resp.Code = OverLimit // another descriptor denied: nothing passed
		}
		ds.Limits = p.statuses[first : k+1 : k+1]
		ds.Unlimited = false // another of its limits applies
		if t := ds.Tightest; t < 0 || d.Remaining < ds.Limits[t].Decision.Remaining {
			ds.Tightest = len(ds.Limits) - 1
		}
	}
	return resp
}
