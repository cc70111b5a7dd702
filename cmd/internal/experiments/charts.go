package experiments

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// AccuracyChart plots the share of requests the sliding window counter
// decided differently from the exact log (replay: both ways together)
// against load, one line per tail index. Results of other shapes are
// grouped by their tail index; each line is sorted by load.
func AccuracyChart(results []AccuracyResult) Chart {
	var tails []float64
	byTail := map[float64][]AccuracyResult{}
	for _, r := range results {
		if _, ok := byTail[r.Shape.TailIndex]; !ok {
			tails = append(tails, r.Shape.TailIndex)
		}
		byTail[r.Shape.TailIndex] = append(byTail[r.Shape.TailIndex], r)
	}
	slices.Sort(tails)
	c := Chart{
		Title:  "Sliding window counter vs exact sliding log",
		XLabel: "load: median source's rate / limit (log)",
		YLabel: "requests decided differently (%, log scale)",
		LogX:   true,
		LogY:   true,
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, a := range tails {
		rs := byTail[a]
		slices.SortFunc(rs, func(x, y AccuracyResult) int { return cmp.Compare(x.Shape.Load, y.Shape.Load) })
		s := Series{Name: fmt.Sprintf("tail index α = %g", a)}
		for _, r := range rs {
			lo, hi = min(lo, r.Shape.Load), max(hi, r.Shape.Load)
			if r.Replay.Total() == 0 { // no place on a log axis: left out, and the legend says so
				s.Name = fmt.Sprintf("tail index α = %g (zeros left out)", a)
				continue
			}
			s.X = append(s.X, r.Shape.Load)
			s.Y = append(s.Y, r.Pct(r.Replay.Total()))
		}
		if len(s.X) > 0 {
			c.Series = append(c.Series, s)
		}
	}
	if len(results) > 0 {
		c.Series = append(c.Series, Series{Name: fmt.Sprintf("published production figure, %g%%", PublishedErrorPct),
			X: []float64{lo, hi}, Y: []float64{PublishedErrorPct, PublishedErrorPct}, Dashed: true})
	}
	return c
}

// PublishedErrorPct is the share of requests wrongly allowed or denied by a
// sliding window counter that Cloudflare published for its production
// traffic (measured on 400 million requests), the figure the
// experiment sets its own against.
const PublishedErrorPct = 0.003

// BoundaryChart plots, for each algorithm, how many requests it admitted in
// the period up to each moment around the boundary, with the limit dashed.
func BoundaryChart(r BoundaryResult) Chart {
	c := Chart{
		Title:  fmt.Sprintf("Burst across a window boundary (limit %d per %s)", r.Rate, r.Period),
		XLabel: "time from the window boundary (periods)",
		YLabel: "admitted in the last period",
	}
	period := float64(r.Period.Microseconds())
	xs := make([]float64, len(r.SampleAt))
	for i, at := range r.SampleAt {
		xs[i] = float64(at) / period
	}
	for _, row := range r.Rows {
		s := Series{Name: row.Algorithm, X: xs}
		for _, n := range row.Curve {
			s.Y = append(s.Y, float64(n))
		}
		c.Series = append(c.Series, s)
	}
	if len(xs) > 0 {
		c.Series = append(c.Series, Series{Name: "limit", X: []float64{xs[0], xs[len(xs)-1]},
			Y: []float64{float64(r.Rate), float64(r.Rate)}, Dashed: true})
	}
	return c
}

// SkewChart plots, for each algorithm, the most admitted in one true window
// (as a multiple of the limit) against the spread of the nodes' clocks.
func SkewChart(r SkewResult) Chart {
	c := Chart{
		Title:  fmt.Sprintf("Clock skew across %d nodes, each enforcing limit/%d", r.Nodes, r.Nodes),
		XLabel: "spread of the nodes' clocks (% of the period)",
		YLabel: "most admitted in one true window / limit",
	}
	period := float64(r.Period)
	var lo, hi float64
	for _, name := range Algorithms {
		s := Series{Name: name}
		for _, row := range r.Rows {
			if row.Algorithm != name {
				continue
			}
			x := 100 * float64(row.Skew) / period
			s.X = append(s.X, x)
			s.Y = append(s.Y, float64(row.MaxWindow)/float64(r.Rate))
			lo, hi = min(lo, x), max(hi, x)
		}
		if len(s.X) > 0 {
			c.Series = append(c.Series, s)
		}
	}
	c.Series = append(c.Series, Series{Name: "limit", X: []float64{lo, hi}, Y: []float64{1, 1}, Dashed: true})
	return c
}
