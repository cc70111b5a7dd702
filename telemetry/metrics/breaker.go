package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate/failover"
)

// breakerStates are the states floodgate_breaker_state shows, in order.
var breakerStates = [...]failover.BreakerState{failover.Closed, failover.Open, failover.HalfOpen}

// breakerCollector exports floodgate_breaker_state by asking the breaker
// at each scrape: nothing to keep in step on the decision path.
type breakerCollector struct {
	desc  *prometheus.Desc
	state atomic.Pointer[func() failover.BreakerState]
}

func newBreakerCollector() *breakerCollector {
	return &breakerCollector{desc: prometheus.NewDesc("floodgate_breaker_state",
		"The store's circuit breaker: 1 for the current state (closed, open, half_open), 0 for the others.",
		[]string{"state"}, nil)}
}

// WatchBreaker makes floodgate_breaker_state show what state returns,
// asked at each scrape: pass the failure policy's State method
// (failover.Limiter's). Until it is called, or after it is called with
// nil, the metric has no series (no breaker). It replaces the function of
// an earlier call, also that of another Observer on the same registry.
func (o *Observer) WatchBreaker(state func() failover.BreakerState) {
	if state == nil {
		o.breaker.state.Store(nil)
		return
	}
	o.breaker.state.Store(&state)
}

// Describe implements prometheus.Collector.
func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.state.Load()
	if f == nil {
		return
	}
	cur := (*f)()
	for _, s := range breakerStates {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.String())
	}
}
