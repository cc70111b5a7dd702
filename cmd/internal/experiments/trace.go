package experiments

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Shape is the shape of a synthetic trace: how unequal the sources are, how
// bursty each one is, and how close to its limit the average source runs.
type Shape struct {
	// TailIndex is the Pareto index α of the sources' mean rates: the share
	// of sources whose rate exceeds x times the smallest falls as x^−α, so a
	// smaller α is a heavier tail (a few sources carry most of the traffic).
	TailIndex float64 `json:"tail_index"`
	// DutyCycle is the share of time a source is on, in (0, 1]. A source
	// alternates exponentially long on and off phases (on phases last one
	// Period on average) and sends only while on, at its mean rate divided by
	// DutyCycle: 1 is a steady Poisson source, 0.1 sends in bursts at 10× its
	// mean rate.
	DutyCycle float64 `json:"duty_cycle"`
	// Load is the typical (median) source's mean rate over the limit rate.
	// With a heavy tail most requests come from sources far above the
	// median, so a load well below 1 still has many requests over the limit.
	Load float64 `json:"load"`
}

// String names the shape in tables and legends.
func (s Shape) String() string {
	return fmt.Sprintf("α=%g duty=%g load=%g", s.TailIndex, s.DutyCycle, s.Load)
}

func (s Shape) validate() error {
	switch {
	case !(s.TailIndex > 0) || math.IsInf(s.TailIndex, 0):
		return fmt.Errorf("%w: tail index must be a positive number, got %v", ErrBadConfig, s.TailIndex)
	case !(s.DutyCycle > 0 && s.DutyCycle <= 1):
		return fmt.Errorf("%w: duty cycle must be in (0, 1], got %v", ErrBadConfig, s.DutyCycle)
	case !(s.Load > 0) || math.IsInf(s.Load, 0):
		return fmt.Errorf("%w: load must be a positive number, got %v", ErrBadConfig, s.Load)
	}
	return nil
}

// sourceCounts splits requests over sources in proportion to Pareto(α)
// weights drawn from seed: every source gets at least one request and the
// counts add up to requests exactly, so a run's size is what was asked. It
// also returns the count of a source of median weight, 2^(1/α), which sets
// how long the trace must last for that source to run at Load.
func sourceCounts(seed uint64, sources int, requests int64, alpha float64) (counts []int64, median float64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	weights := make([]float64, sources)
	var sum float64
	for i := range weights {
		weights[i] = math.Pow(1-rng.Float64(), -1/alpha) // Pareto with scale 1; 1−U is in (0, 1]
		sum += weights[i]
	}
	counts = make([]int64, sources)
	spare := requests - int64(sources) // one each first
	given := int64(sources)
	for i, w := range weights {
		counts[i] = 1 + int64(float64(spare)*w/sum)
		given += counts[i] - 1
	}
	for i := 0; given < requests; i = (i + 1) % sources { // the rounding remainder, one each
		counts[i]++
		given++
	}
	return counts, 1 + float64(spare)*math.Pow(2, 1/alpha)/sum
}

// arrivals writes n arrival times (µs, ascending, in [start, start+span)) of
// one on/off source into buf and returns it. The on and off phases are
// exponential, with mean on-phase onMean µs and duty the share of time on;
// given its count, a Poisson source's arrivals are uniform over its on time,
// which is what is drawn.
func arrivals(rng *rand.Rand, buf []int64, phases []float64, n, start int64, span, onMean, duty float64) ([]int64, []float64) {
	offMean := onMean * (1 - duty) / duty
	phases = phases[:0] // pairs: on-phase start, on-phase end (µs from start)
	on := rng.Float64() < duty
	for t := 0.0; t < span; {
		if duty == 1 {
			phases = append(phases, 0, span)
			break
		}
		mean := offMean
		if on {
			mean = onMean
		}
		end := math.Min(span, t+rng.ExpFloat64()*mean)
		if on {
			phases = append(phases, t, end)
		}
		t, on = end, !on
	}
	var onTime float64
	for i := 0; i < len(phases); i += 2 {
		onTime += phases[i+1] - phases[i]
	}
	if onTime == 0 { // a source that was never on still sent its requests: spread them over the run
		phases, onTime = append(phases[:0], 0, span), span
	}
	// n sorted uniforms on [0, onTime) from n+1 exponential spacings,
	// then mapped through the on phases to real time.
	buf = buf[:0]
	var acc float64
	for i := int64(0); i < n; i++ {
		acc += rng.ExpFloat64()
		buf = append(buf, int64(math.Float64bits(acc))) // stash the float; converted below
	}
	total := acc + rng.ExpFloat64()
	phase, before := 0, 0.0 // on time before the current phase
	for i, bitsOf := range buf {
		x := math.Float64frombits(uint64(bitsOf)) / total * onTime
		for phase+2 < len(phases) && x >= before+phases[phase+1]-phases[phase] {
			before += phases[phase+1] - phases[phase]
			phase += 2
		}
		buf[i] = start + int64(phases[phase]+(x-before))
	}
	return buf, phases
}
