package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
)

// A surface reports each request to the Observer; /metrics serves what
// it recorded.
func Example() {
	obs, err := metrics.New(prometheus.NewRegistry(), metrics.Options{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", obs.Handler())

	// What a surface does for each request (observe.Report does it for a
	// surface that decides its limits together).
	ctx := observe.Begin(context.Background(), obs, observe.SurfaceProxy, "api")
	obs.Observe(ctx, observe.Event{Policy: "api", Limit: "per-user", Key: "203.0.113.7", Outcome: observe.Denied,
		Cost: 1, Decision: floodgate.Decision{Limit: 10, RetryAfter: time.Second}})
	observe.End(ctx, obs, observe.Summary{Policy: "api", Outcome: observe.Denied, Limits: 1, Latency: 40 * time.Microsecond})

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "floodgate_decisions_total{") || strings.HasPrefix(line, "floodgate_decision_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// floodgate_decision_duration_seconds_count{policy="api"} 1
	// floodgate_decisions_total{limit="per-user",policy="api",result="denied"} 1
}
