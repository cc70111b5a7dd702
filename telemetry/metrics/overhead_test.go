package metrics_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
)

// httplimit over floodgate.Memory reports its decisions to the metrics
// and insight without allocating: a request allocates as many times with
// them as without any observer (Memory needs no Notes, and recording in
// existing series allocates nothing), timed or not.
func TestObservingMemoryDecisionsAllocatesNothing(t *testing.T) {
	observed := func(sampler *observe.Sampler) observe.Observer {
		m, err := metrics.New(prometheus.NewRegistry(), metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		in, err := insight.New(insight.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return observe.Sample(observe.Multi(m, in), sampler)
	}
	untimed, err := observe.NewSampler(observe.SamplerOptions{FullRate: 1, Rand: func(uint64) uint64 { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(o observe.Observer) float64 {
		mem := floodgate.NewMemory()
		t.Cleanup(mem.Close)
		mw, err := httplimit.New(mem, httplimit.Options{Name: "api", Observer: o,
			Rules: []httplimit.Rule{{Name: "per-user", Limit: floodgate.PerSecond(1 << 30), Key: httplimit.ByHeader("X-User")}}})
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r, err := http.NewRequest(http.MethodGet, "http://example.com/items", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.RemoteAddr = "192.0.2.1:4242"
		w := &discard{h: http.Header{}}
		r.Header.Set("X-User", "alice")
		return testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
	}
	off := allocs(nil)
	for _, c := range []struct {
		name string
		obs  observe.Observer
	}{
		{"every decision timed", observed(nil)},
		{"sampled", observed(untimed)},
	} {
		if got := allocs(c.obs); got != off {
			t.Errorf("%s: a request allocates %v times with metrics and insight, %v without: want as many", c.name, got, off)
		}
	}
}
