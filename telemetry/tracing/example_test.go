package tracing_test

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/redisstore"
	"github.com/floodgate-io/floodgate/telemetry/tracing"
)

// A service turns tracing on from its environment (OTEL_EXPORTER_OTLP_ENDPOINT
// and the rest), wraps its handler with otelhttp so that incoming trace
// context is picked up, and its Redis client so that the store's commands
// are spans too.
func Example() {
	ctx := context.Background()
	tp, shutdown, enabled, err := tracing.Setup(ctx, tracing.Config{})
	if err != nil {
		slog.Error("tracing", "err", err)
		return
	}
	defer shutdown(ctx)

	cfg := redisstore.Config{Addrs: []string{"127.0.0.1:6379"}}
	var obs observe.Observer // and the metrics observer, the decision log, ... (observe.Multi)
	if enabled {
		cfg.WrapClient = tracing.WrapClient(tp)
		obs = tracing.New(tracing.Options{TracerProvider: tp})
	}
	_ = obs // handed to the surface (httplimit.Options, grpclimit, ...)

	var handler http.Handler = http.NotFoundHandler() // the limited service
	http.Handle("/", otelhttp.NewHandler(handler, "api"))
}
