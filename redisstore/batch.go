package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/floodgate-io/floodgate"
)

// AllowAll implements floodgate.BatchLimiter: all or nothing.
//
// When every key lives in one hash slot (always on a standalone server; on a
// cluster, give the keys a common hash tag such as "{tenant:42}:user:7") the
// batch is one script call and atomic: no other decision sees a partial
// batch. Otherwise the requests are taken in order, one call each, and on a
// denial what was taken is refunded; concurrent decisions may then observe
// the quota that was briefly taken (never more than the limits allow), and
// if the store fails in the middle the error is returned after refunding
// what can be refunded.
//
// The whole batch, its refunds and the decisions it reports included,
// returns within Timeout (or ctx's deadline) as AllowN does. A batch cut
// off by its deadline takes nothing more and goes on without its caller
// only to give back what it took; a request that was on the wire at that
// moment may still have been counted, as in AllowN.
func (l *Limiter) AllowAll(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	cs := make([]*compiled, len(reqs))
	for i, rq := range reqs {
		c, err := l.prepare(rq.Key, rq.Limit, rq.Cost)
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	var out []floodgate.Decision
	err := l.do(ctx, reqs[0].Key, func(ctx context.Context, p *pending) (err error) {
		if !l.cluster.Load() || sameSlot(l.cfg.KeyPrefix, reqs) {
			out, err = l.atomicBatch(ctx, reqs, cs)
		} else {
			out, err = l.orderedBatch(ctx, p.gone, reqs, cs)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (l *Limiter) atomicBatch(ctx context.Context, reqs []floodgate.Request, cs []*compiled) ([]floodgate.Decision, error) {
	keys := make([]string, len(reqs))
	args := []string{l.now(), l.slack}
	for i, rq := range reqs {
		keys[i] = l.cfg.KeyPrefix + rq.Key
		args = append(args, strconv.FormatInt(rq.Cost, 10))
		args = append(args, cs[i].args[:]...)
	}
	replies, err := l.scripts.batch.Exec(ctx, l.client, keys, args).ToArray()
	if err != nil {
		return nil, l.storeError(ctx, reqs[0].Key, err)
	}
	if len(replies) != len(reqs) {
		return nil, fmt.Errorf("redisstore: batch script replied %d decisions for %d requests", len(replies), len(reqs))
	}
	out := make([]floodgate.Decision, len(reqs))
	for i, r := range replies {
		v, err := r.AsIntSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: batch reply %d: %w", i, err)
		}
		if out[i], _, err = decision(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// orderedBatch takes the requests one by one and refunds on a denial, or
// as soon as its caller has left (it takes nothing more then).
func (l *Limiter) orderedBatch(ctx context.Context, gone func() bool, reqs []floodgate.Request, cs []*compiled) ([]floodgate.Decision, error) {
	out := make([]floodgate.Decision, len(reqs))
	taken := make([]int64, 0, len(reqs)) // the time each admitted request was decided at
	for i, rq := range reqs {
		if gone() {
			return nil, l.refundAll(reqs[:len(taken)], cs, taken, l.timedOut)
		}
		d, at, err := l.call(ctx, l.scripts.single[cs[i].params.Kind], rq.Key, singleArgs(l.now(), cs[i], rq.Cost, l.slack))
		if err != nil {
			return nil, l.refundAll(reqs[:len(taken)], cs, taken, err)
		}
		out[i] = d
		if !d.Allowed {
			if err := l.refundAll(reqs[:len(taken)], cs, taken, nil); err != nil {
				return nil, err
			}
			if gone() { // nobody to report to
				return nil, l.timedOut
			}
			return l.report(ctx, reqs, cs, i, d)
		}
		taken = append(taken, at)
	}
	return out, nil
}

// refundAll gives back what the first len(taken) requests took, newest
// first, on an ioContext of its own: a batch whose caller gave up, or whose
// take ran out of time, still gives back what it took.
func (l *Limiter) refundAll(reqs []floodgate.Request, cs []*compiled, taken []int64, cause error) error {
	ctx, cancel := l.ioContext()
	defer cancel()
	for i := len(taken) - 1; i >= 0; i-- {
		if reqs[i].Cost == 0 {
			continue
		}
		args := append(l.args(cs[i], reqs[i].Cost), strconv.FormatInt(taken[i], 10))
		if _, err := l.scripts.refund.Exec(ctx, l.client, []string{l.cfg.KeyPrefix + reqs[i].Key}, args).ToInt64(); err != nil {
			return fmt.Errorf("redisstore: refunding %q after a denied batch: %w", reqs[i].Key, l.storeError(ctx, reqs[i].Key, err))
		}
	}
	return cause
}

// report describes a denied batch as the atomic path does.
func (l *Limiter) report(ctx context.Context, reqs []floodgate.Request, cs []*compiled, failed int, sequential floodgate.Decision) ([]floodgate.Decision, error) {
	out := make([]floodgate.Decision, len(reqs))
	for i, rq := range reqs {
		d, _, err := l.call(ctx, l.scripts.peek, rq.Key, l.args(cs[i], rq.Cost))
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	if out[failed].RetryAfter == 0 {
		out[failed].RetryAfter = sequential.RetryAfter
	}
	return out, nil
}
