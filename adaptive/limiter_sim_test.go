package adaptive

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// limRelease is a simulated request that will finish at done.
type limRelease struct {
	done time.Time
	tok  Token
}

type limReleases []limRelease

func (h limReleases) Len() int           { return len(h) }
func (h limReleases) Less(i, j int) bool { return h[i].done.Before(h[j].done) }
func (h limReleases) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *limReleases) Push(x any)        { *h = append(*h, x.(limRelease)) }
func (h *limReleases) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// classLoad is the outcome of a simulated run for each class.
type classLoad struct {
	arrived, admitted [numClasses]int
}

func (c classLoad) share(p Priority) float64 {
	return float64(c.admitted[p]) / float64(c.arrived[p])
}

// simulateClasses drives a Limiter of a fixed limit, on a virtual clock,
// with Poisson arrivals at load × the backend's capacity (limit requests
// in flight, each served in an exponential time of mean service), of the
// classes in mix (weights), and counts who is admitted.
func simulateClasses(t *testing.T, seed uint64, limit int, load float64, mix [numClasses]float64, arrivals int) classLoad {
	t.Helper()
	const service = 10 * time.Millisecond
	r := newRig(t, limit, LimiterOptions{})
	rng := rand.New(rand.NewPCG(seed, seed))
	rate := load * float64(limit) / service.Seconds() // arrivals per second
	var total float64
	for _, w := range mix {
		total += w
	}
	var out classLoad
	var pending limReleases
	next := limEpoch
	for range arrivals {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		for pending.Len() > 0 && !pending[0].done.After(next) {
			rel := heap.Pop(&pending).(limRelease)
			r.clock.Set(rel.done)
			rel.tok.Success()
		}
		r.clock.Set(next)
		p, x := Sheddable, rng.Float64()*total
		for x >= mix[p] && p < Critical {
			x -= mix[p]
			p++
		}
		out.arrived[p]++
		if tok, ok := r.TryAcquire(p); ok {
			out.admitted[p]++
			done := next.Add(time.Duration(rng.ExpFloat64() * float64(service)))
			heap.Push(&pending, limRelease{done, tok})
		}
	}
	return out
}

// Under a three-class overload the classes are served in order of
// importance: critical requests nearly all pass while sheddable ones absorb
// the shedding; under light load everyone passes. Critical traffic stays
// below the capacity (critical ≥ 99% cannot hold when critical alone
// exceeds it).
func TestOverloadShedsTheLowestClassFirst(t *testing.T) {
	for _, tc := range []struct {
		load         float64
		mix          [numClasses]float64
		minCritical  float64
		minSheddable float64
	}{
		{load: 0.5, mix: [numClasses]float64{0.6, 0.3, 0.1}, minCritical: 0.99, minSheddable: 0.99},
		{load: 3, mix: [numClasses]float64{0.6, 0.3, 0.1}, minCritical: 0.99},
		{load: 3, mix: [numClasses]float64{0.4, 0.4, 0.2}, minCritical: 0.99},
		{load: 10, mix: [numClasses]float64{0.67, 0.3, 0.03}, minCritical: 0.99},
	} {
		out := simulateClasses(t, 17, 100, tc.load, tc.mix, 60000)
		shares := [numClasses]float64{out.share(Sheddable), out.share(Default), out.share(Critical)}
		t.Logf("load %gx, mix %v: admitted sheddable %.3f, default %.3f, critical %.3f", tc.load, tc.mix, shares[Sheddable], shares[Default], shares[Critical])
		if !(shares[Critical] >= shares[Default] && shares[Default] >= shares[Sheddable]) {
			t.Errorf("load %gx: shares %v not ordered critical ≥ default ≥ sheddable", tc.load, shares)
		}
		if shares[Critical] < tc.minCritical {
			t.Errorf("load %gx: critical admitted %.4f, want ≥ %g", tc.load, shares[Critical], tc.minCritical)
		}
		if shares[Sheddable] < tc.minSheddable {
			t.Errorf("load %gx: sheddable admitted %.4f, want ≥ %g", tc.load, shares[Sheddable], tc.minSheddable)
		}
	}
}
