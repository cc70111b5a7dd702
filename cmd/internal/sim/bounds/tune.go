package bounds

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Confirm measures a setting: it runs strategy with p (p.Interval, and
// p.OneIn for sampled, set to the tuned values) and returns what it saw.
// Tune takes it as a value so that the simulator, a real cluster or a test
// can answer.
type Confirm func(ctx context.Context, strategy string, p Params) (Measurement, error)

// Measurement is what a Confirm saw at one setting.
type Measurement struct {
	// Overshoot is the worst overshoot of a window, in units.
	Overshoot float64 `json:"overshoot"`
	// StoreCallsPerSecond is the shared-store calls it made per second,
	// over the fleet.
	StoreCallsPerSecond float64 `json:"store_calls_per_second"`
}

// TuneRow is Tune's answer for one strategy.
type TuneRow struct {
	Strategy string `json:"strategy"`
	// Verdict: bounded (a longest T, or for sampled a largest 1/p, fits),
	// any (every setting fits), none (no setting fits).
	Verdict Verdict `json:"verdict"`
	// Interval is the T to run with: the longest that fits, or for a
	// strategy whose bound fits at any T the limit's Period (one round per
	// window); 0 when the strategy has no T or nothing fits.
	Interval time.Duration `json:"interval_ns"`
	// IntervalText is Interval as Go prints durations, "" when 0.
	IntervalText string `json:"interval"`
	// OneIn is sampled's 1/p, the largest that fits.
	OneIn int64 `json:"one_in,omitempty"`
	// Lease is leased's lease at that T.
	Lease *Lease `json:"lease,omitempty"`
	// Overshoot and Undershoot are the bounds at the setting, in units
	// per window; Tolerance is the overshoot allowed, tolerance·R.
	Overshoot  float64 `json:"overshoot_bound"`
	Undershoot float64 `json:"undershoot_bound"`
	Tolerance  float64 `json:"tolerance_units"`
	// StoreCallsPerSecond is the setting's cost (see StoreCallsPerSecond).
	StoreCallsPerSecond float64 `json:"store_calls_per_second"`
	// Measured is what Confirm saw, nil when not confirmed (no Confirm,
	// nothing to run, or ConfirmError).
	Measured     *Measurement `json:"measured,omitempty"`
	ConfirmError string       `json:"confirm_error,omitempty"`
	// Reason explains the verdict.
	Reason string `json:"reason"`
}

// Confirmed reports whether the row was measured within its tolerance.
func (r TuneRow) Confirmed() bool { return r.Measured != nil && r.Measured.Overshoot <= r.Tolerance }

// ErrConfirmFailed is wrapped by Tune's error when Confirm failed for some
// strategy; the rows are returned all the same.
var ErrConfirmFailed = errors.New("bounds: confirmation failed")

// Tune answers, for each strategy, the longest T (leased and synced) or the
// largest 1/p (sampled) whose worst-case overshoot stays within
// tolerance·R, with that setting's bounds and cost in shared-store calls
// for keys keys, and, when confirm is not nil, the overshoot confirm
// measured at that setting. p.Interval and p.OneIn are ignored. An
// invalid p fails at once; a failing confirm is reported in its row and,
// wrapped in ErrConfirmFailed, in the error.
func Tune(ctx context.Context, strategies []string, p Params, tolerance float64, keys int, confirm Confirm) ([]TuneRow, error) {
	if err := checkTolerance(tolerance); err != nil {
		return nil, err
	}
	if keys < 1 {
		return nil, fmt.Errorf("%w: keys must be at least 1, got %d", ErrInvalidParams, keys)
	}
	rows := make([]TuneRow, 0, len(strategies))
	var failed []error
	for _, s := range strategies {
		row, q, err := tuneSetting(s, p, tolerance)
		if err != nil {
			return nil, err
		}
		if err := row.fill(q, keys); err != nil {
			return nil, err
		}
		if confirm != nil && row.Verdict != NoInterval {
			if err := row.confirm(ctx, confirm, q); err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				failed = append(failed, fmt.Errorf("%s: %w", s, err))
			}
		}
		rows = append(rows, row)
	}
	if len(failed) > 0 {
		return rows, fmt.Errorf("%w: %w", ErrConfirmFailed, errors.Join(failed...))
	}
	return rows, nil
}

// tuneSetting picks strategy's setting and returns the row's verdict, the
// setting and the params that carry it.
func tuneSetting(strategy string, p Params, tolerance float64) (TuneRow, Params, error) {
	row := TuneRow{Strategy: strategy, Tolerance: tolerance * float64(p.Limit.Rate)}
	p.Interval = p.Limit.Period // the reference T of a strategy that fits at any T
	if strategy == Sampled {
		return tuneSampled(row, p, tolerance)
	}
	a, err := SearchInterval(strategy, p, tolerance)
	if err != nil {
		return row, p, err
	}
	row.Verdict, row.Reason = a.Verdict, a.Reason
	switch {
	case a.Verdict == Bounded:
		p.Interval = a.Interval
	case a.Verdict == AnyInterval && usesInterval(strategy):
		row.Reason += fmt.Sprintf("; T = the limit's Period (%s) shown, one round per window", p.Limit.Period)
	}
	if usesInterval(strategy) && a.Verdict != NoInterval {
		row.Interval, row.IntervalText = p.Interval, p.Interval.String()
	}
	return row, p, nil
}

// tuneSampled picks sampled's 1/p.
func tuneSampled(row TuneRow, p Params, tolerance float64) (TuneRow, Params, error) {
	oneIn, ok, err := LargestOneIn(p, tolerance)
	if err != nil {
		return row, p, err
	}
	if !ok {
		p.OneIn = 1
		o, _ := Overshoot(Sampled, p)
		row.Verdict = NoInterval
		row.Reason = fmt.Sprintf("even with p = 1 the staleness term (N−1)·(1 + λ·D) gives %s, above %s", units(o), units(row.Tolerance))
		return row, p, nil
	}
	p.OneIn, row.OneIn, row.Verdict = oneIn, oneIn, Bounded
	if oneIn == maxOneIn {
		row.Verdict = AnyInterval
	}
	confidence, err := SampledConfidence(p)
	row.Reason = fmt.Sprintf("sampled has no T; largest 1/p within tolerance, with probability ≥ %.2f per window", confidence)
	return row, p, err
}

// usesInterval tells the strategies whose setting is a T.
func usesInterval(strategy string) bool {
	return strategy == Leased || strategy == Synced || strategy == Gossip
}

// fill computes the row's bounds and cost at the setting q.
func (r *TuneRow) fill(q Params, keys int) error {
	if r.Verdict == NoInterval {
		if !usesInterval(r.Strategy) {
			// The figures at the only setting there is still inform.
			return r.fillFigures(q, keys)
		}
		return nil
	}
	if r.Strategy == Leased {
		lease, err := LeaseSize(q)
		if err != nil {
			return err
		}
		r.Lease = &lease
	}
	return r.fillFigures(q, keys)
}

// fillFigures sets the overshoot, undershoot and cost of the row.
func (r *TuneRow) fillFigures(q Params, keys int) error {
	var err1, err2, err3 error
	r.Overshoot, err1 = Overshoot(r.Strategy, q)
	r.Undershoot, err2 = Undershoot(r.Strategy, q)
	r.StoreCallsPerSecond, err3 = StoreCallsPerSecond(r.Strategy, q, keys)
	return errors.Join(err1, err2, err3)
}

// confirm runs Confirm at the row's setting.
func (r *TuneRow) confirm(ctx context.Context, confirm Confirm, q Params) error {
	measured, err := confirm(ctx, r.Strategy, q)
	if err != nil {
		r.ConfirmError = err.Error()
		return err
	}
	r.Measured = &measured
	return nil
}
