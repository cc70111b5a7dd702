package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/internal/breaker"
)

// The metrics of the bulkheads and breakers, read from their state when
// scraped (adaptive.Limiter.Stats, breaker.Breaker.State): requests pay
// nothing for them. Route labels are route names from the policy (plus
// UnroutedName, or OneLineName), so they are bounded.
var (
	limitDesc = prometheus.NewDesc("floodgate_concurrency_limit",
		"The concurrency limit of a route's bulkhead: learned (--concurrency adaptive) or fixed.", []string{"route"}, nil)
	inflightDesc = prometheus.NewDesc("floodgate_concurrency_inflight",
		"Requests of a route in flight to the upstream.", []string{"route"}, nil)
	queueDesc = prometheus.NewDesc("floodgate_concurrency_queue",
		"Requests of a route waiting for a slot of its bulkhead.", []string{"route"}, nil)
	rttDesc = prometheus.NewDesc("floodgate_concurrency_rtt_seconds",
		"The smoothed round-trip time of a route's successful requests, as its bulkhead sees it.", []string{"route"}, nil)
	admittedDesc = prometheus.NewDesc("floodgate_concurrency_admitted_total",
		"Requests a route's bulkhead admitted, by priority class.", []string{"route", "class"}, nil)
	shedDesc = prometheus.NewDesc("floodgate_shed_total",
		"Requests a route's bulkhead shed (503), by priority class and reason: at_limit, queue_full, waited_too_long, standing_queue, displaced.",
		[]string{"route", "class", "reason"}, nil)
	breakerDesc = prometheus.NewDesc("floodgate_upstream_breaker_state",
		"1 for the state the circuit breaker of a route's upstream is in (closed, open, half_open), 0 for the others.", []string{"route", "state"}, nil)
)

// collector is a prometheus.Collector over a bulkheads' guards.
type collector struct{ b *bulkheads }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{limitDesc, inflightDesc, queueDesc, rttDesc, admittedDesc, shedDesc, breakerDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the guards of the policy set
// in force.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.cur.Load()
	if s == nil {
		return
	}
	for _, g := range s.all {
		if g.limiter != nil {
			collectLimiter(ch, g.name, g.limiter.Stats())
		}
		if g.brk != nil {
			state := g.brk.State()
			for _, st := range breaker.States() {
				v := 0.0
				if st == state {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, v, g.name, st.String())
			}
		}
	}
}

func collectLimiter(ch chan<- prometheus.Metric, route string, st adaptive.Stats) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, route)
	}
	gauge(limitDesc, float64(st.Limit))
	gauge(inflightDesc, float64(st.InFlight))
	gauge(queueDesc, float64(st.Queued))
	gauge(rttDesc, st.RTT.Seconds())
	for p := range st.Admitted {
		class := adaptive.Priority(p).String()
		ch <- prometheus.MustNewConstMetric(admittedDesc, prometheus.CounterValue, float64(st.Admitted[p]), route, class)
		for r, n := range st.Shed[p] {
			ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.CounterValue, float64(n), route, class, adaptive.ShedReason(r).String())
		}
	}
}

// Collector returns the metrics of the proxy's bulkheads and breakers,
// for a prometheus.Registry.
func (p *Proxy) Collector() prometheus.Collector { return collector{p.guards} }

// Collector returns the metrics of the bulkhead and breaker, for a
// prometheus.Registry.
func (p *Protected) Collector() prometheus.Collector { return collector{p.b} }
