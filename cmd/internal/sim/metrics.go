package sim

import (
	"math"
	"slices"
)

// Window is what the fleet did in one window of the limit's Period,
// aligned to true time.
type Window struct {
	// Start is the window's start, in µs since the start of the run.
	Start int64 `json:"start_us"`
	// Offered counts the requests that arrived in the window, Admitted
	// those admitted in it, Denied those denied or failed.
	Offered  int64 `json:"offered"`
	Admitted int64 `json:"admitted"`
	Denied   int64 `json:"denied"`
	// Overshoot is Admitted − Rate when positive.
	Overshoot int64 `json:"overshoot"`
	// Undershoot counts denials made while the window's admitted count
	// still had room for the request (at that instant).
	Undershoot int64 `json:"undershoot"`
	// Shortfall is min(Offered, Rate) − Admitted when positive: what the
	// window could have admitted more by its end, the undershoot of the
	// strategies' stated bounds.
	Shortfall int64 `json:"shortfall"`
}

// oracle counts, per window of true time, what the fleet was offered and
// admitted, and per node and client what each was offered and admitted.
type oracle struct {
	start, period, rate int64
	windows             []Window
	clientOffered       []int64
	clientAdmitted      []int64
	errors              int64
}

func newOracle(start, period, rate int64, windows, clients int) *oracle {
	o := &oracle{start: start, period: period, rate: rate, windows: make([]Window, windows),
		clientOffered: make([]int64, clients), clientAdmitted: make([]int64, clients)}
	for i := range o.windows {
		o.windows[i].Start = int64(i) * period
	}
	return o
}

// window returns the window holding time t, or nil outside the run.
func (o *oracle) window(t int64) *Window {
	i := (t - o.start) / o.period
	if t < o.start || i >= int64(len(o.windows)) {
		return nil
	}
	return &o.windows[i]
}

// offer counts an arrival at t.
func (o *oracle) offer(t int64, n *node, client int) {
	if w := o.window(t); w != nil {
		w.Offered++
		n.offered++
		o.clientOffered[client]++
	}
}

// decide counts a decision taken at t.
func (o *oracle) decide(t int64, n *node, client int, allowed, failed bool) {
	w := o.window(t)
	if w == nil {
		return
	}
	if failed {
		o.errors++
	}
	if allowed {
		w.Admitted++
		n.admitted++
		o.clientAdmitted[client]++
		return
	}
	w.Denied++
	if w.Admitted+1 <= o.rate {
		w.Undershoot++
	}
}

// jain is Jain's fairness index of the ratios admitted/offered over the
// members that were offered anything: 1 when all got the same share, 1/n
// when one got everything. It is 1 when nobody was offered anything.
func jain(admitted, offered []int64) float64 {
	var sum, squares float64
	n := 0
	for i := range offered {
		if offered[i] == 0 {
			continue
		}
		x := float64(admitted[i]) / float64(offered[i])
		sum += x
		squares += x * x
		n++
	}
	if n == 0 || squares == 0 {
		return 1
	}
	return sum * sum / (float64(n) * squares)
}

// percentile is the nearest-rank q-quantile (0 < q ≤ 1) of values.
func percentile(values []int64, q float64) int64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
