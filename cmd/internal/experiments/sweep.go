package experiments

import "context"

// ShapeSweep returns base followed by shapes that each change one of its
// dimensions (tail index, duty cycle, load), so a table over them shows how
// the sliding window counter's accuracy moves with each.
func ShapeSweep(base Shape) []Shape {
	shapes := []Shape{base}
	add := func(s Shape) {
		for _, have := range shapes {
			if have == s {
				return
			}
		}
		shapes = append(shapes, s)
	}
	for _, a := range []float64{1.2, 2, 3} {
		add(Shape{TailIndex: a, DutyCycle: base.DutyCycle, Load: base.Load})
	}
	for _, d := range []float64{1, 0.05} {
		add(Shape{TailIndex: base.TailIndex, DutyCycle: d, Load: base.Load})
	}
	for _, l := range []float64{0.001, 0.003, 0.03} {
		add(Shape{TailIndex: base.TailIndex, DutyCycle: base.DutyCycle, Load: l})
	}
	return shapes
}

// AccuracySweep runs [SlidingAccuracy] once per shape, every run with base's
// size, limit and seed.
func AccuracySweep(ctx context.Context, base AccuracyConfig, shapes []Shape) ([]AccuracyResult, error) {
	out := make([]AccuracyResult, 0, len(shapes))
	for _, s := range shapes {
		cfg := base
		cfg.Shape = s
		r, err := SlidingAccuracy(ctx, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
