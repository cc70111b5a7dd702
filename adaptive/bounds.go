package adaptive

import (
	"fmt"
	"math"
)

// The bounds every learning Algorithm starts from when its options leave
// them zero.
const (
	DefaultMinLimit     = 1
	DefaultMaxLimit     = 1000
	DefaultInitialLimit = 20
	// DefaultUtilisation is the share of the limit that must be in flight
	// for a sample to grow the limit: a limit nobody uses is not grown.
	DefaultUtilisation = 0.8
)

// bounds is the range a limit is kept in. The limit is learnt as a float,
// so that increases smaller than one request add up, and is read as an
// int rounded down.
type bounds struct{ min, max float64 }

// newBounds fills zero options with the defaults and checks them; name
// is the options type, for the error message.
func newBounds(name string, initial, min, max *int) (bounds, error) {
	for _, f := range []struct {
		field string
		v     *int
		def   int
	}{{"MinLimit", min, DefaultMinLimit}, {"MaxLimit", max, DefaultMaxLimit}, {"InitialLimit", initial, DefaultInitialLimit}} {
		if *f.v < 0 {
			return bounds{}, fmt.Errorf("%w: %s.%s %d: want at least 1 (0 for the default, %d)", ErrInvalidOptions, name, f.field, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if *min > *max {
		return bounds{}, fmt.Errorf("%w: %s.MinLimit %d is above MaxLimit %d", ErrInvalidOptions, name, *min, *max)
	}
	if *initial < *min || *initial > *max {
		return bounds{}, fmt.Errorf("%w: %s.InitialLimit %d is outside [MinLimit %d, MaxLimit %d]", ErrInvalidOptions, name, *initial, *min, *max)
	}
	return bounds{min: float64(*min), max: float64(*max)}, nil
}

// clamp keeps x within the bounds.
func (b bounds) clamp(x float64) float64 { return math.Max(b.min, math.Min(b.max, x)) }

// ratioOption fills a zero ratio with def and checks that it lies in
// (0, hi] (or (0, hi) when open).
func ratioOption(name, field string, v *float64, def, hi float64, open bool) error {
	if *v == 0 {
		*v = def
	}
	if math.IsNaN(*v) || *v <= 0 || *v > hi || (open && *v == hi) {
		want := fmt.Sprintf("(0, %g]", hi)
		if open {
			want = fmt.Sprintf("(0, %g)", hi)
		}
		return fmt.Errorf("%w: %s.%s %g: want a value in %s (0 for the default, %g)", ErrInvalidOptions, name, field, *v, want, def)
	}
	return nil
}

// utilised says whether a request admitted with inFlight requests in flight
// used enough of limit for its success to be a reason to grow it.
func utilised(inFlight int, limit, threshold float64) bool {
	return float64(inFlight) >= limit*threshold
}

// ema is an exponentially weighted moving average over about window
// samples; its first samples are averaged plainly, so that it does not
// start from zero.
type ema struct {
	value  float64
	n      int
	window int
}

func (e *ema) add(x float64) float64 {
	if e.n < e.window {
		e.n++
	}
	w := math.Max(2/float64(e.window+1), 1/float64(e.n))
	e.value += w * (x - e.value)
	return e.value
}
