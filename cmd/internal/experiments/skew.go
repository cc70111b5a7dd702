package experiments

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// SkewConfig sets up [ClockSkew]: Nodes nodes behind a load balancer share
// a limit of Rate per Period, each enforcing Rate/Nodes in memory on its own
// clock. Node i's clock is off by Skew·(i/(Nodes−1) − ½), so the clocks
// spread evenly over a range of width Skew around true time.
type SkewConfig struct {
	Nodes   int
	Rate    int64 // the global limit; each node enforces Rate/Nodes, which must be whole
	Period  time.Duration
	Skews   []time.Duration // the spreads to measure, each in [0, Period]
	Periods int             // how long the trace lasts, in periods
	Seed    uint64
}

func (c SkewConfig) validate() error {
	switch {
	case c.Nodes <= 0:
		return fmt.Errorf("%w: nodes must be positive, got %d", ErrBadConfig, c.Nodes)
	case c.Rate <= 0 || c.Rate%int64(c.Nodes) != 0:
		return fmt.Errorf("%w: rate %d must be a positive multiple of the node count %d, so each node's share is whole", ErrBadConfig, c.Rate, c.Nodes)
	case c.Period <= 0 || c.Period%time.Microsecond != 0:
		return fmt.Errorf("%w: period must be a positive whole number of microseconds, got %s", ErrBadConfig, c.Period)
	case c.Periods < 2:
		return fmt.Errorf("%w: periods must be at least 2, got %d", ErrBadConfig, c.Periods)
	case len(c.Skews) == 0:
		return fmt.Errorf("%w: no skews to measure", ErrBadConfig)
	}
	for _, s := range c.Skews {
		if s < 0 || s > c.Period {
			return fmt.Errorf("%w: skew %s is outside [0, %s]", ErrBadConfig, s, c.Period)
		}
	}
	return nil
}

// SkewRow is one algorithm at one skew. Counts are over the true, aligned
// windows [k·Period, (k+1)·Period) of the trace.
type SkewRow struct {
	Algorithm string        `json:"algorithm"`
	Skew      time.Duration `json:"skew_ns"`
	MaxWindow int64         `json:"max_window"` // most admitted in one true window
	P99Window int64         `json:"p99_window"` // 99th percentile of the same
	OverShare float64       `json:"over_share"` // share of true windows that admitted more than Rate
	MaxPeriod int64         `json:"max_period"` // most admitted in any interval of one Period
	Admitted  int64         `json:"admitted"`   // over the whole trace
	Requests  int64         `json:"requests"`   // sent over the whole trace
}

// SkewResult is [ClockSkew]'s answer: one row per algorithm and skew, in the
// order of [Algorithms] then of the skews.
type SkewResult struct {
	Nodes  int           `json:"nodes"`
	Rate   int64         `json:"rate"`
	Period time.Duration `json:"period_ns"`
	Rows   []SkewRow     `json:"rows"`
}

// ClockSkew replays one bursty trace (on/off, on phases of half a period on
// average at 4·Rate, off three times as long: Rate on average, bursts above
// it) spread round-robin over the nodes, for every algorithm and skew. With no
// skew, fixed windows on every node line up with the true windows, and a
// true window can never hold more than Rate. With skew, a node's window
// straddles a true boundary, so a true window can hold the end of one of its
// windows and the start of the next: up to 2·Rate/Nodes per node.
func ClockSkew(cfg SkewConfig) (SkewResult, error) {
	if err := cfg.validate(); err != nil {
		return SkewResult{}, err
	}
	period := int64(cfg.Period / time.Microsecond)
	trace := burstyTrace(cfg.Seed, cfg.Rate, period, cfg.Periods)
	res := SkewResult{Nodes: cfg.Nodes, Rate: cfg.Rate, Period: cfg.Period}
	for _, name := range Algorithms {
		for _, skew := range cfg.Skews {
			row, err := runSkewed(cfg, name, skew, trace, period)
			if err != nil {
				return SkewResult{}, err
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

func runSkewed(cfg SkewConfig, algorithm string, skew time.Duration, trace []int64, period int64) (SkewRow, error) {
	nodes := make([]*unitLimiter, cfg.Nodes)
	offsets := make([]int64, cfg.Nodes)
	for i := range nodes {
		l, err := newUnitLimiter(algorithm, cfg.Rate/int64(cfg.Nodes), cfg.Period)
		if err != nil {
			return SkewRow{}, err
		}
		nodes[i] = l
		if cfg.Nodes > 1 {
			offsets[i] = int64(skew/time.Microsecond)*int64(i)/int64(cfg.Nodes-1) - int64(skew/time.Microsecond)/2
		}
	}
	admitted := make([]int64, 0, len(trace))
	for j, t := range trace {
		n := j % cfg.Nodes // round-robin load balancing
		if nodes[n].allow(t + offsets[n]) {
			admitted = append(admitted, t)
		}
	}
	counts := perWindow(admitted, alignedStart(period), period, cfg.Periods)
	row := SkewRow{
		Algorithm: algorithm, Skew: skew, Admitted: int64(len(admitted)), Requests: int64(len(trace)),
		MaxPeriod: maxInAnyPeriod(admitted, period),
	}
	var over int
	for _, c := range counts {
		if c > cfg.Rate {
			over++
		}
	}
	row.OverShare = float64(over) / float64(len(counts))
	slices.Sort(counts)
	row.MaxWindow = counts[len(counts)-1]
	row.P99Window = counts[(len(counts)-1)*99/100]
	return row, nil
}

// burstyTrace returns ascending request times (µs) over periods periods from
// alignedStart(period): on phases (mean period/2) at 4·rate per period, off phases
// three times as long on average, both exponential.
func burstyTrace(seed uint64, rate, period int64, periods int) []int64 {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := alignedStart(period)
	end := float64(period) * float64(periods)
	gap := float64(period) / float64(4*rate) // mean spacing while on
	var trace []int64
	for t, on := 0.0, false; t < end; on = !on {
		if !on {
			t += rng.ExpFloat64() * 1.5 * float64(period)
			continue
		}
		phaseEnd := min(end, t+rng.ExpFloat64()*0.5*float64(period))
		for t += rng.ExpFloat64() * gap; t < phaseEnd; t += rng.ExpFloat64() * gap {
			trace = append(trace, start+int64(t))
		}
		t = phaseEnd
	}
	return trace
}
