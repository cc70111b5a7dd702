package experiments

import (
	"fmt"
	"time"
)

// BoundaryConfig sets up [BoundaryBurst]: one client with a limit of Rate per
// Period sends Rate requests spread evenly over the Width before a window
// boundary and Rate more over the Width after it.
type BoundaryConfig struct {
	Rate   int64
	Period time.Duration
	// Width is how long each burst lasts; each must fit its Rate requests at
	// least 1µs apart, and the two together must fit in one Period.
	Width time.Duration
	// Samples is how many points of the admitted-in-the-last-period curve to
	// return, over three periods centred on the boundary; 0 means none.
	Samples int
}

func (c BoundaryConfig) validate() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("%w: rate must be positive, got %d", ErrBadConfig, c.Rate)
	case c.Period <= 0 || c.Period%time.Microsecond != 0:
		return fmt.Errorf("%w: period must be a positive whole number of microseconds, got %s", ErrBadConfig, c.Period)
	case c.Width < time.Duration(c.Rate)*time.Microsecond:
		return fmt.Errorf("%w: width %s cannot hold %d requests 1µs apart", ErrBadConfig, c.Width, c.Rate)
	case 2*c.Width > c.Period:
		return fmt.Errorf("%w: two bursts of width %s do not fit in one period (%s)", ErrBadConfig, c.Width, c.Period)
	case c.Samples < 0:
		return fmt.Errorf("%w: samples must not be negative, got %d", ErrBadConfig, c.Samples)
	}
	return nil
}

// BoundaryRow is one algorithm's result on the boundary trace.
type BoundaryRow struct {
	Algorithm   string `json:"algorithm"`
	Admitted    int64  `json:"admitted"`      // of the 2·Rate requests sent
	MaxInPeriod int64  `json:"max_in_period"` // most admitted in any interval of one Period
	// Curve[i] is how many were admitted in the Period up to SampleAt[i].
	Curve []int64 `json:"curve,omitempty"`
}

// BoundaryResult is [BoundaryBurst]'s answer. SampleAt is in µs relative to
// the boundary.
type BoundaryResult struct {
	Rate     int64         `json:"rate"`
	Period   time.Duration `json:"period_ns"`
	Width    time.Duration `json:"width_ns"`
	SampleAt []int64       `json:"sample_at_us,omitempty"`
	Rows     []BoundaryRow `json:"rows"`
}

// BoundaryBurst sends the boundary trace through each of [Algorithms] and
// reports the most each admitted in any interval of one Period. The fixed
// window admits both bursts: 2·Rate within 2·Width. The sliding log admits
// Rate; the sliding window counter and the token bucket admit Rate plus what
// their estimate or refill frees during the bursts, which shrinks with Width.
func BoundaryBurst(cfg BoundaryConfig) (BoundaryResult, error) {
	if err := cfg.validate(); err != nil {
		return BoundaryResult{}, err
	}
	period := int64(cfg.Period / time.Microsecond)
	boundary := alignedStart(period) + 10*period
	trace := boundaryTrace(boundary, cfg.Rate, int64(cfg.Width/time.Microsecond))
	res := BoundaryResult{Rate: cfg.Rate, Period: cfg.Period, Width: cfg.Width}
	var sampleAt []int64
	for i := range cfg.Samples {
		offset := -3*period/2 + int64(i)*3*period/int64(max(1, cfg.Samples-1))
		res.SampleAt = append(res.SampleAt, offset)
		sampleAt = append(sampleAt, boundary+offset)
	}
	for _, name := range Algorithms {
		l, err := newUnitLimiter(name, cfg.Rate, cfg.Period)
		if err != nil {
			return BoundaryResult{}, err
		}
		var admitted []int64
		for _, t := range trace {
			if l.allow(t) {
				admitted = append(admitted, t)
			}
		}
		row := BoundaryRow{Algorithm: name, Admitted: int64(len(admitted)), MaxInPeriod: maxInAnyPeriod(admitted, period)}
		if len(sampleAt) > 0 {
			row.Curve = trailingCounts(admitted, sampleAt, period)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// boundaryTrace returns rate request times evenly over [boundary − width,
// boundary) and rate more over [boundary, boundary + width), in µs.
func boundaryTrace(boundary, rate, width int64) []int64 {
	trace := make([]int64, 0, 2*rate)
	for i := range rate {
		trace = append(trace, boundary-width+i*width/rate)
	}
	for i := range rate {
		trace = append(trace, boundary+i*width/rate)
	}
	return trace
}
