package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
)

// overheadKeys is how many callers the overhead benchmark spreads its
// requests over: more than insight's counters per sub-interval (128), so
// that its summaries replace counters as under real traffic.
const overheadKeys = 10_000

// discard is a ResponseWriter that keeps nothing, so that the benchmark
// measures the middleware and its observers, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// overheadObservers are the observers the benchmark compares: none (the
// hook off), and what floodgate serve and proxy assemble (metrics and
// insight), each alone and together.
func overheadObservers(b *testing.B) []struct {
	name string
	obs  func() observe.Observer
} {
	newMetrics := func() observe.Observer {
		m, err := metrics.New(prometheus.NewRegistry(), metrics.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	newInsight := func() observe.Observer {
		in, err := insight.New(insight.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return in
	}
	return []struct {
		name string
		obs  func() observe.Observer
	}{
		{"off", func() observe.Observer { return nil }},
		{"metrics", func() observe.Observer { return observe.SampleByDefault(newMetrics()) }},
		{"insight", func() observe.Observer { return observe.SampleByDefault(newInsight()) }},
		{"metrics+insight", func() observe.Observer { return observe.SampleByDefault(observe.Multi(newMetrics(), newInsight())) }},
		{"metrics+insight,exact", func() observe.Observer { return observe.Sample(observe.Multi(newMetrics(), newInsight()), nil) }},
	}
}

// overheadHandler is httplimit over floodgate.Memory with one rule that
// admits everything, in front of a handler that writes nothing, reporting
// to obs; and requests from overheadKeys callers.
func overheadHandler(b *testing.B, obs observe.Observer) (http.Handler, []*http.Request) {
	mem := floodgate.NewMemory()
	b.Cleanup(mem.Close)
	mw, err := httplimit.New(mem, httplimit.Options{
		Name:     "api",
		Observer: obs,
		Rules:    []httplimit.Rule{{Name: "per-user", Limit: floodgate.PerSecond(1 << 30), Key: httplimit.ByHeader("X-User")}},
	})
	if err != nil {
		b.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs := make([]*http.Request, overheadKeys)
	for i := range reqs {
		r, err := http.NewRequest(http.MethodGet, "http://example.com/items", nil)
		if err != nil {
			b.Fatal(err)
		}
		r.RemoteAddr = "192.0.2.1:4242"
		r.Header.Set("X-User", fmt.Sprint("user-", i))
		reqs[i] = r
	}
	for _, r := range reqs { // every key's state exists before the timing
		h.ServeHTTP(&discard{h: http.Header{}}, r)
	}
	return h, reqs
}

// BenchmarkOverhead is issue 16's overhead measure, side by side: one
// library decision (httplimit over floodgate.Memory, one rule, many keys)
// with the observers off, and with the metrics, insight, and both as
// floodgate serve and proxy assemble them. The difference between "off"
// and "metrics+insight" is what observing costs per decision; the goal is
// at most 100 ns.
//
//	go test -run '^$' -bench Overhead -benchmem ./metrics/
func BenchmarkOverhead(b *testing.B) {
	for _, oc := range overheadObservers(b) {
		b.Run(oc.name, func(b *testing.B) {
			h, reqs := overheadHandler(b, oc.obs())
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
				i++
			}
		})
	}
}

// BenchmarkOverheadParallel is BenchmarkOverhead on every CPU at once,
// where the observers' shared state (locks, counters) contends.
func BenchmarkOverheadParallel(b *testing.B) {
	for _, oc := range overheadObservers(b) {
		b.Run(oc.name, func(b *testing.B) {
			h, reqs := overheadHandler(b, oc.obs())
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discard{h: http.Header{}}
				i := int(next.Add(7919))
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, reqs[i%len(reqs)])
					i++
				}
			})
		})
	}
}

// BenchmarkHook is the hook alone, without the middleware around it: what
// httplimit calls per request (observe.Start, Decided, Report: one Event
// and End) with the observers of BenchmarkOverhead, over overheadKeys
// callers. It is steadier than BenchmarkOverhead on a busy machine, and
// its "off" is the cost of a nil Observer: nothing. It names
// floodgate.Memory as the limiter, as httplimit over it does, so that the
// report needs no context of its own (observe.Undegradable).
//
//	go test -run '^$' -bench Hook -benchmem ./metrics/
func BenchmarkHook(b *testing.B) {
	keys := make([][]floodgate.Request, overheadKeys)
	for i := range keys {
		keys[i] = []floodgate.Request{{Key: fmt.Sprint("per-user:user-", i), Limit: floodgate.PerSecond(1 << 30), Cost: 1}}
	}
	ds := []floodgate.Decision{{Allowed: true, Limit: 1 << 30, Remaining: 1 << 29, ResetAfter: time.Second}}
	name := func(int) string { return "per-user" }
	mem := floodgate.NewMemory()
	b.Cleanup(mem.Close)
	for _, oc := range overheadObservers(b) {
		b.Run(oc.name, func(b *testing.B) {
			obs := oc.obs()
			ctx := context.Background()
			hook := func(i int) {
				var rep observe.Reporting
				rep.Start(ctx, obs, observe.Decided{Surface: observe.SurfaceHTTP, Policy: "api", Client: "192.0.2.1",
					Requests: keys[i%len(keys)], Limiter: mem})
				rep.Decided()
				rep.Report(ds, nil, name)
			}
			for i := range keys {
				hook(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				hook(i)
				i++
			}
		})
	}
}

// BenchmarkObserveUntimed is the metrics' part of BenchmarkHook alone: one
// allowed event in known series, untimed as most are under sampling.
//
//	go test -run '^$' -bench ObserveUntimed -benchmem ./metrics/
func BenchmarkObserveUntimed(b *testing.B) {
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e := observe.Event{Surface: observe.SurfaceHTTP, Policy: "api", Limit: "per-user", Key: "per-user:user-1", Outcome: observe.Allowed,
		Cost: 1, Decision: floodgate.Decision{Allowed: true, Limit: 1 << 30, Remaining: 1 << 29}, Untimed: true}
	ctx := context.Background()
	m.Observe(ctx, e)
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(ctx, e)
	}
}
