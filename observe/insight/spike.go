package insight

import "math"

// The signals a spike is detected on, per policy.
const (
	SignalDecisions = "decisions" // every decision, whatever its outcome
	SignalDenials   = "denials"   // Denied and ShadowDenied decisions
)

// The kinds of the events Insight records itself.
const (
	KindSpikeStart = "spike_start"
	KindSpikeEnd   = "spike_end"
)

// spikeRules are the thresholds, shared by every detector.
type spikeRules struct {
	alpha          float64 // EWMA weight of the newest second
	z, delta, rate float64 // SpikeZ, SpikeMinDelta, SpikeMinRatio
	warmUp         int     // seconds
	adaptAfter     int     // seconds a spike may last before it becomes the baseline
}

func newSpikeRules(o Options) spikeRules {
	tau := o.SpikeTimeConstant.Seconds()
	return spikeRules{
		alpha:      1 - math.Exp(-1/tau),
		z:          o.SpikeZ,
		delta:      o.SpikeMinDelta,
		rate:       o.SpikeMinRatio,
		warmUp:     int(math.Ceil(o.SpikeWarmUp.Seconds())),
		adaptAfter: int(math.Ceil(10 * tau)),
	}
}

// detector follows one signal of one policy: an exponentially weighted
// moving mean and variance of its per-second rate (the baseline), and
// whether the rate is in a spike.
type detector struct {
	mean, variance float64
	seen           int  // seconds fed
	inSpike        bool // the current seconds are a spike
	spikeFor       int  // seconds the current spike has lasted
	peak           float64
}

// spikeNote is a change of state that the caller turns into an event.
type spikeNote struct {
	start     bool
	rate      float64 // the second's rate
	mean, z   float64 // the baseline it departed from (start) or came back to (end)
	peak      float64 // end: the highest rate of the spike
	lasted    int     // end: seconds
	newNormal bool    // end: the spike lasted so long that it became the baseline
}

// score is how far x lies above the baseline, in standard deviations. The
// deviation is at least √mean (counts of independent arrivals are Poisson:
// their variance is their mean) and at least 1, so that a quiet or
// perfectly regular signal does not make every wobble infinitely unlikely.
func (d *detector) score(x float64) float64 {
	sd := math.Sqrt(max(d.variance, d.mean, 1))
	return (x - d.mean) / sd
}

// above reports whether x departs from the baseline by every threshold
// scaled by f (1 to start a spike, ½ to stay in one: the hysteresis keeps
// a rate hovering at the threshold from flapping).
func (r *spikeRules) above(d *detector, x, f float64) bool {
	return d.score(x) > r.z*f && x-d.mean > r.delta*f && x > d.mean*(1+(r.rate-1)*f)
}

// feed takes one complete second's rate x. While a spike lasts the
// baseline is frozen, so that the spike cannot raise the bar it is
// measured against; a spike that lasts 10τ is taken as the new normal: it
// ends and the baseline starts again from the current rate.
func (r *spikeRules) feed(d *detector, x float64) (spikeNote, bool) {
	if d.inSpike {
		d.spikeFor++
		d.peak = max(d.peak, x)
		switch {
		case d.spikeFor >= r.adaptAfter:
			n := spikeNote{rate: x, mean: x, peak: d.peak, lasted: d.spikeFor, newNormal: true}
			*d = detector{mean: x, seen: d.seen + 1}
			return n, true
		case !r.above(d, x, 0.5):
			n := spikeNote{rate: x, mean: d.mean, z: d.score(x), peak: d.peak, lasted: d.spikeFor}
			d.inSpike, d.spikeFor, d.peak = false, 0, 0
			r.learn(d, x)
			return n, true
		}
		return spikeNote{}, false
	}
	if d.seen >= r.warmUp && r.above(d, x, 1) {
		d.inSpike, d.spikeFor, d.peak = true, 0, x
		return spikeNote{start: true, rate: x, mean: d.mean, z: d.score(x)}, true
	}
	r.learn(d, x)
	return spikeNote{}, false
}

// learn moves the baseline towards x (West's incremental EWMA of mean and
// variance); the first second sets the mean.
func (r *spikeRules) learn(d *detector, x float64) {
	if d.seen == 0 {
		d.mean, d.seen = x, 1
		return
	}
	diff := x - d.mean
	inc := r.alpha * diff
	d.mean += inc
	d.variance = (1 - r.alpha) * (d.variance + diff*inc)
	d.seen++
}

// maxGap is the most empty seconds a policy's baseline is fed in one go
// after it was idle: after 10τ of silence the baseline has decayed to
// nothing anyway, so feeding more would only cost time.
func maxGap(o Options) int64 { return int64(math.Ceil(10 * o.SpikeTimeConstant.Seconds())) }
