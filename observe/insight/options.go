package insight

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Options configures an Insight. The zero value of every field means its
// default; New refuses a negative, out-of-range or inconsistent value with
// an error that wraps ErrInvalidOption and names the field.
type Options struct {
	// Clock tells the time; nil is the system clock. Everything Insight
	// measures (sub-intervals, seconds, reset times) follows it, so that a
	// test or simulation drives it with a floodgate.ManualClock.
	Clock floodgate.Clock

	// Window is how far back the top consumers look. Default 1 minute.
	Window time.Duration
	// Slots is the number of sub-intervals Window is cut into: the top
	// consumers cover the current, partial sub-interval and the Slots−1
	// before it, so the window slides in steps of Window/Slots (which must
	// be a whole number of seconds). Default 6 (10 s steps).
	Slots int
	// Counters is K, the Space-Saving counters per policy, sub-interval and
	// direction (admitted, denied): the error bound is N/K. Top answers at
	// most K keys. Default 128, at most 65536.
	Counters int
	// MaxPolicies bounds the policies tracked one by one; events of any
	// further policy are counted under OtherPolicy. Each policy holds up to
	// 2·Slots·Counters counters (about 96 KB at the defaults). Default
	// 1000.
	MaxPolicies int

	// NearLimitRatio is the share of its limit at or above which a key's
	// decision puts it on the near-limit list (envoyproxy/ratelimit's
	// NEAR_LIMIT_RATIO). In (0, 1]. Default 0.8.
	NearLimitRatio float64
	// MaxNearLimit bounds the near-limit keys kept over all policies.
	// Default 1000.
	MaxNearLimit int

	// SpikeZ is the z-score above the baseline at which a second's rate
	// starts a spike. Default 4.
	SpikeZ float64
	// SpikeMinDelta is the absolute floor: a second's rate must also exceed
	// the baseline mean by this many per second (so that 2 → 6 per second
	// is no spike). Default 10.
	SpikeMinDelta float64
	// SpikeMinRatio is the relative floor: a second's rate must also be at
	// least this multiple of the baseline mean (so that a 5% rise of heavy,
	// smooth traffic is no spike). At least 1. Default 1.5.
	SpikeMinRatio float64
	// SpikeTimeConstant is τ of the baseline's exponentially weighted
	// moving mean and variance: each second weighs α = 1 − e^(−1s/τ), so a
	// second's weight halves after τ·ln 2. Default 1 minute (α ≈ 0.0165).
	SpikeTimeConstant time.Duration
	// SpikeWarmUp is how long a policy's baseline learns before it may
	// report a spike. Default 1 minute.
	SpikeWarmUp time.Duration

	// RateWindow is how many of the last complete seconds the live rates
	// (decisions and denials per second) average. Whole seconds, 1 s to
	// 1 minute. Default 5 s.
	RateWindow time.Duration
	// MaxEvents bounds the ring of recent events. Default 256.
	MaxEvents int
	// OnEvent, when set, is called with every event recorded (spikes and
	// Record's), synchronously, after it is in the ring and outside any of
	// Insight's locks: a place to log and count them. It must not keep
	// or modify the record's Fields, which the ring shares.
	OnEvent func(EventRecord)

	// HashKeys shows every key as the first 16 hex digits of its SHA-256
	// instead of raw, for operators who may not see keys.
	HashKeys bool
}

// ErrInvalidOption is wrapped by New's errors for a bad Options field.
var ErrInvalidOption = errors.New("insight: invalid option")

// The defaults of Options.
const (
	DefaultWindow            = time.Minute
	DefaultSlots             = 6
	DefaultCounters          = 128
	DefaultMaxPolicies       = 1000
	DefaultNearLimitRatio    = 0.8
	DefaultMaxNearLimit      = 1000
	DefaultSpikeZ            = 4
	DefaultSpikeMinDelta     = 10
	DefaultSpikeMinRatio     = 1.5
	DefaultSpikeTimeConstant = time.Minute
	DefaultSpikeWarmUp       = time.Minute
	DefaultRateWindow        = 5 * time.Second
	DefaultMaxEvents         = 256
	maxCounters              = 1 << 16
	maxBound                 = 1 << 24 // MaxPolicies, MaxNearLimit, MaxEvents
)

func (o Options) withDefaults() Options {
	setDefault(&o.Window, DefaultWindow)
	setDefault(&o.Slots, DefaultSlots)
	setDefault(&o.Counters, DefaultCounters)
	setDefault(&o.MaxPolicies, DefaultMaxPolicies)
	setDefault(&o.NearLimitRatio, DefaultNearLimitRatio)
	setDefault(&o.MaxNearLimit, DefaultMaxNearLimit)
	setDefault(&o.SpikeZ, DefaultSpikeZ)
	setDefault(&o.SpikeMinDelta, DefaultSpikeMinDelta)
	setDefault(&o.SpikeMinRatio, DefaultSpikeMinRatio)
	setDefault(&o.SpikeTimeConstant, DefaultSpikeTimeConstant)
	setDefault(&o.SpikeWarmUp, DefaultSpikeWarmUp)
	setDefault(&o.RateWindow, DefaultRateWindow)
	setDefault(&o.MaxEvents, DefaultMaxEvents)
	return o
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// validate checks o after defaults are applied.
func (o Options) validate() error {
	checks := []struct {
		ok          bool
		field, want string
		got         any
	}{
		{o.Window > 0, "Window", "positive", o.Window},
		{o.Slots >= 1 && o.Slots <= 3600, "Slots", "between 1 and 3600", o.Slots},
		{o.Slots < 1 || (o.Window%time.Duration(o.Slots) == 0 && (o.Window/time.Duration(o.Slots))%time.Second == 0),
			"Window", "a whole number of seconds per slot (Window/Slots)", o.Window},
		{o.Counters >= 1 && o.Counters <= maxCounters, "Counters", fmt.Sprintf("between 1 and %d", maxCounters), o.Counters},
		{o.MaxPolicies >= 1 && o.MaxPolicies <= maxBound, "MaxPolicies", fmt.Sprintf("between 1 and %d", maxBound), o.MaxPolicies},
		{o.NearLimitRatio > 0 && o.NearLimitRatio <= 1, "NearLimitRatio", "in (0, 1]", o.NearLimitRatio},
		{o.MaxNearLimit >= 1 && o.MaxNearLimit <= maxBound, "MaxNearLimit", fmt.Sprintf("between 1 and %d", maxBound), o.MaxNearLimit},
		{finitePositive(o.SpikeZ), "SpikeZ", "a positive number", o.SpikeZ},
		{finitePositive(o.SpikeMinDelta), "SpikeMinDelta", "a positive number", o.SpikeMinDelta},
		{finitePositive(o.SpikeMinRatio) && o.SpikeMinRatio >= 1, "SpikeMinRatio", "a number of at least 1", o.SpikeMinRatio},
		{o.SpikeTimeConstant >= time.Second, "SpikeTimeConstant", "at least 1s", o.SpikeTimeConstant},
		{o.SpikeWarmUp > 0, "SpikeWarmUp", "positive", o.SpikeWarmUp},
		{o.RateWindow >= time.Second && o.RateWindow <= time.Minute && o.RateWindow%time.Second == 0,
			"RateWindow", "whole seconds from 1s to 1m", o.RateWindow},
		{o.MaxEvents >= 1 && o.MaxEvents <= maxBound, "MaxEvents", fmt.Sprintf("between 1 and %d", maxBound), o.MaxEvents},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("%w: %s is %v, want %s", ErrInvalidOption, c.field, c.got, c.want)
		}
	}
	return nil
}

func finitePositive(f float64) bool { return f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }
