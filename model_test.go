package floodgate_test

import (
	"math/big"
	"time"

	"github.com/floodgate-io/floodgate"
)

// This file is an independent reference for every algorithm, written from
// its textbook definition in exact rational arithmetic over the history of
// admitted requests. The implementation (integer GCRA, windows, log) must
// agree with it on every decision.

// admitted is one request that passed.
type admitted struct {
	at, cost int64 // µs
	delay    int64 // leaky bucket: µs held
}

// modelDecision is what the reference says of a request of cost at now.
type modelDecision struct {
	allowed   bool
	remaining int64
	delay     int64 // leaky bucket only, µs rounded up
}

func rat(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func ceilRat(r *big.Rat) int64 {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func floorRat(r *big.Rat) int64 {
	return new(big.Int).Div(r.Num(), r.Denom()).Int64()
}

func periodMicros(l floodgate.Limit) int64 { return int64(l.Period / time.Microsecond) }

func burstOf(l floodgate.Limit) int64 {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// modelDecide answers a request of cost at now given the history.
func modelDecide(l floodgate.Limit, history []admitted, now, cost int64) modelDecision {
	switch l.Algorithm {
	case floodgate.TokenBucket, floodgate.LeakyBucket:
		return modelBucket(l, history, now, cost)
	case floodgate.FixedWindow:
		return modelFixedWindow(l, history, now, cost)
	case floodgate.SlidingLog:
		return modelSlidingLog(l, history, now, cost)
	case floodgate.SlidingWindow:
		return modelSlidingWindow(l, history, now, cost)
	}
	panic("unknown algorithm")
}

// modelBucket is the classic token bucket: tokens refill at Rate/Period per
// µs up to Burst, a request takes cost tokens. For the leaky bucket the
// missing tokens are the queue, and a request waits until it has drained.
func modelBucket(l floodgate.Limit, history []admitted, now, cost int64) modelDecision {
	burst, perUS := rat(burstOf(l)), new(big.Rat).SetFrac64(l.Rate, periodMicros(l))
	tokens, last := new(big.Rat).Set(burst), now // a fresh bucket is full
	if len(history) > 0 {
		last = history[0].at
	}
	advance := func(at int64) {
		tokens.Add(tokens, new(big.Rat).Mul(perUS, rat(at-last)))
		if tokens.Cmp(burst) > 0 {
			tokens.Set(burst)
		}
		last = at
	}
	for _, h := range history {
		advance(h.at)
		tokens.Sub(tokens, rat(h.cost))
	}
	advance(now)
	d := modelDecision{allowed: tokens.Cmp(rat(cost)) >= 0 && cost <= burstOf(l)}
	missing := new(big.Rat).Sub(burst, tokens)
	if d.allowed && l.Algorithm == floodgate.LeakyBucket {
		d.delay = ceilRat(new(big.Rat).Quo(missing, perUS))
	}
	if d.allowed {
		tokens.Sub(tokens, rat(cost))
	}
	d.remaining = max(0, floorRat(tokens))
	return d
}

func modelFixedWindow(l floodgate.Limit, history []admitted, now, cost int64) modelDecision {
	p := periodMicros(l)
	window := floorDivModel(now, p)
	used := int64(0)
	for _, h := range history {
		if floorDivModel(h.at, p) == window {
			used += h.cost
		}
	}
	d := modelDecision{allowed: used+cost <= l.Rate}
	if d.allowed {
		used += cost
	}
	d.remaining = max(0, l.Rate-used)
	return d
}

func modelSlidingLog(l floodgate.Limit, history []admitted, now, cost int64) modelDecision {
	used := int64(0)
	for _, h := range history {
		if h.at > now-periodMicros(l) {
			used += h.cost
		}
	}
	d := modelDecision{allowed: used+cost <= l.Rate}
	if d.allowed {
		used += cost
	}
	d.remaining = max(0, l.Rate-used)
	return d
}

// modelSlidingWindow evaluates previous·(1 − elapsed/Period) + current in
// rationals.
func modelSlidingWindow(l floodgate.Limit, history []admitted, now, cost int64) modelDecision {
	p := periodMicros(l)
	window := floorDivModel(now, p)
	var previous, current int64
	for _, h := range history {
		switch floorDivModel(h.at, p) {
		case window:
			current += h.cost
		case window - 1:
			previous += h.cost
		}
	}
	elapsed := now - window*p
	weight := new(big.Rat).SetFrac64(p-elapsed, p)
	estimate := new(big.Rat).Add(new(big.Rat).Mul(rat(previous), weight), rat(current))
	d := modelDecision{allowed: new(big.Rat).Add(estimate, rat(cost)).Cmp(rat(l.Rate)) <= 0}
	if d.allowed {
		estimate.Add(estimate, rat(cost))
	}
	d.remaining = max(0, floorRat(new(big.Rat).Sub(rat(l.Rate), estimate)))
	return d
}

func floorDivModel(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
