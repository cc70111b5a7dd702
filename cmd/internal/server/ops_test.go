package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
)

// scrape returns the series of a metric in the /metrics text.
func (h *harness) scrape(metric string) []string {
	h.t.Helper()
	r := h.do("GET", "/metrics", "")
	if r.status != 200 {
		h.t.Fatalf("/metrics: %d", r.status)
	}
	var out []string
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if strings.HasPrefix(line, metric+"{") || strings.HasPrefix(line, metric+" ") {
			out = append(out, line)
		}
	}
	return out
}

func TestMetricsHaveBoundedLabels(t *testing.T) {
	// Every decision timed: above observe.DefaultFullRate, which a fast
	// machine reaches here, the latency histogram would sample.
	obs, err := observers.New(context.Background(), observers.Config{TimeEvery: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close(context.Background()) })
	h := newHarness(t, setup{opts: func(o *server.Options) { o.Observers = obs }})
	// Two series first: a domain nobody defined, an explicit limit.
	h.should(&rlsv3.RateLimitRequest{Domain: "attacker-chosen", Descriptors: rreq(rdesc("user", "x")).Descriptors})
	h.post("/v1/allow", `{"key":"k","limit":{"algorithm":"sliding_log","rate":1,"period":"1s"}}`)
	// Then 5000 users under one limit, and reports whose detailed_metric
	// limit makes a label per value: past the bound on (policy, limit)
	// pairs they are counted as the policy's _other.
	const users, reports = 5000, metrics.DefaultMaxLimits + 100
	const reportSeries = metrics.DefaultMaxLimits - 3 // the two above and api.user
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				d := rdesc("user", fmt.Sprint("u", i))
				if i >= users {
					d = rdesc("report", fmt.Sprint("r", i))
				}
				if _, err := h.rls.ShouldRateLimit(context.Background(), rreq(d)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range users + reports {
		work <- i
	}
	close(work)
	wg.Wait()

	series := h.scrape("floodgate_decisions_total")
	count := map[string]int{}
	for _, s := range series {
		switch {
		case strings.Contains(s, `limit="api.user",policy="api"`):
			count["user"]++
			if !strings.HasSuffix(s, fmt.Sprint(" ", users)) {
				t.Errorf("user series %s, want %d decisions", s, users)
			}
		case strings.Contains(s, `limit="api.report_`):
			count["report"]++
		case strings.Contains(s, `limit="_other",policy="api"`):
			count["other"]++
			if !strings.HasSuffix(s, fmt.Sprint(" ", reports-reportSeries)) {
				t.Errorf("other series %s, want %d", s, reports-reportSeries)
			}
		case strings.Contains(s, `limit="_none",policy="_unknown",result="allowed"`):
			count["unknown"]++
		case strings.Contains(s, `limit="sliding_log",policy="_explicit",result="allowed"`):
			count["explicit"]++
		default:
			t.Errorf("unexpected series %s", s)
		}
	}
	if count["user"] != 1 || count["report"] != reportSeries || count["other"] != 1 || count["unknown"] != 1 || count["explicit"] != 1 {
		t.Fatalf("series: %v", count)
	}
	for _, s := range h.scrape("floodgate_decision_duration_seconds_count") {
		if !strings.Contains(s, `policy="api"`) && !strings.Contains(s, `policy="_unknown"`) && !strings.Contains(s, `policy="_explicit"`) {
			t.Errorf("latency series %s", s)
		}
		if strings.Contains(s, `policy="api"`) && !strings.HasSuffix(s, fmt.Sprint(" ", users+reports)) {
			t.Errorf("one observation per request: %s", s)
		}
	}
}

func TestMetricsResults(t *testing.T) {
	h := newHarness(t, setup{})
	for range 3 {
		h.should(rreq(rdesc("beta", "x"), rdesc("user", "ann")))
	}
	h.should(rreq(rdesc("path", "/health")))
	want := map[string]bool{
		`floodgate_decisions_total{limit="api.beta",policy="api",result="allowed"} 1`:       true,
		`floodgate_decisions_total{limit="api.beta",policy="api",result="shadow_denied"} 2`: true,
		`floodgate_decisions_total{limit="api.user",policy="api",result="allowed"} 3`:       true,
		`floodgate_decisions_total{limit="_none",policy="api",result="allowed"} 1`:          true,
	}
	for _, s := range h.scrape("floodgate_decisions_total") {
		if !want[s] {
			t.Errorf("unexpected %s", s)
		}
		delete(want, s)
	}
	for s := range want {
		t.Errorf("missing %s", s)
	}
	h.should(rreq(rdesc("user", "ann")))
	if got := h.scrape("floodgate_decisions_total"); !strings.Contains(strings.Join(got, "\n"), `limit="api.user",policy="api",result="denied"} 1`) {
		t.Errorf("no denial counted: %v", got)
	}
}

// panicky panics on every decision.
type panicky struct{}

func (panicky) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	panic("the store exploded")
}

func TestPanicIsA500(t *testing.T) {
	h := newHarness(t, setup{store: panicky{}, opts: func(o *server.Options) { o.Limiter = panicky{} }})
	for _, tc := range []struct{ path, body string }{
		{"/v1/allow", lookup(0, "user", "ann")},
		{"/v1/allow", `{"key":"k","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"}}`},
		{"/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`},
	} {
		r := h.post(tc.path, tc.body)
		if r.status != 500 || r.json(t)["error"] != "internal error" {
			t.Errorf("%s: %d %s", tc.path, r.status, r.body)
		}
	}
	_, err := h.rls.ShouldRateLimit(context.Background(), rreq(rdesc("user", "ann")))
	if status.Code(err) != codes.Internal {
		t.Errorf("gRPC: %v", err)
	}
	if r := h.do("GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("the server died: %d", r.status)
	}
	if n := strings.Count(h.logs.String(), "the store exploded"); n != 4 {
		t.Fatalf("%d panics logged:\n%s", n, h.logs)
	}
}

// unavailable is a store that cannot answer.
type unavailable struct{}

func (unavailable) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, fmt.Errorf("redis 127.0.0.1:6379: %w", floodgate.ErrStoreUnavailable)
}

func TestStoreUnavailable(t *testing.T) {
	h := newHarness(t, setup{store: unavailable{}})
	_, err := h.rls.ShouldRateLimit(context.Background(), rreq(rdesc("user", "ann")))
	if st := status.Convert(err); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "127.0.0.1") {
		t.Fatalf("gRPC: %v", err)
	}
	if r := h.post("/v1/allow", lookup(0, "user", "ann")); r.status != 503 {
		t.Fatalf("HTTP: %d %s", r.status, r.body)
	}
	if r := h.post("/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`); r.status != 503 {
		t.Fatalf("/json: %d %s", r.status, r.body)
	}
	if got := h.scrape("floodgate_store_errors_total"); !slices.Contains(got, `floodgate_store_errors_total{kind="connection"} 3`) {
		t.Fatalf("store errors: %s", got)
	}
	if got := strings.Join(h.scrape("floodgate_decisions_total"), "\n"); got != `floodgate_decisions_total{limit="_none",policy="api",result="error"} 3` {
		t.Fatalf("decisions: %s", got)
	}
	if !strings.Contains(h.logs.String(), "127.0.0.1") {
		t.Fatal("the cause is not logged")
	}
}

func TestGRPCHealthAndReflection(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := h.health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%q: %v %v", svc, resp, err)
		}
	}
	if _, err := h.health.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v", err)
	}
	problem := "warming up"
	h.notOK.Store(&problem)
	if resp, err := h.health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("not ready: %v %v", resp, err)
	}
	list, err := h.health.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(list.Statuses) != 2 || list.Statuses[""].Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("list: %v %v", list, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timing.Patience)
	defer cancel()
	watch, err := h.health.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch: %v %v", m, err)
	}
	h.notOK.Store(nil)
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch after ready: %v %v", m, err)
	}

	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "envoy.service.ratelimit.v3.RateLimitService") || !strings.Contains(got, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", names)
	}
	stream.CloseSend()

	// A watcher still open does not hold up the shutdown, and learns of it.
	h.stop()
	for {
		m, err := watch.Recv()
		if err != nil {
			break
		}
		if m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("watch during shutdown: %v", m)
		}
	}
}

// gate is a store whose decisions wait until it is opened.
type gate struct {
	floodgate.Limiter
	entered chan string
	open    chan struct{}
}

func (g *gate) AllowN(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
	g.entered <- key
	<-g.open
	return g.Limiter.AllowN(ctx, key, l, cost)
}

func TestServeShutsDownGracefully(t *testing.T) {
	g := &gate{entered: make(chan string, 2), open: make(chan struct{})}
	h := newHarness(t, setup{store: g})
	g.Limiter = h.mem

	httpDone := make(chan response, 1)
	go func() { httpDone <- h.post("/v1/allow", lookup(0, "user", "ann")) }()
	grpcDone := make(chan error, 1)
	go func() {
		resp, err := h.rls.ShouldRateLimit(context.Background(), rreq(rdesc("user", "bob")))
		if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
			err = fmt.Errorf("%v", resp)
		}
		grpcDone <- err
	}()
	<-g.entered
	<-g.entered // both requests are in flight

	h.cancel()
	// New connections are refused while the old ones finish: the listener
	// closes once Serve sees the cancel, and Serve cannot return while the
	// gate holds both requests.
	addr := strings.TrimPrefix(h.url, "http://")
	for deadline := time.Now().Add(timing.Patience); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("HTTP still accepted connections %v after the cancel", timing.Patience)
		}
	}
	select {
	case err := <-h.served:
		t.Fatalf("Serve returned with requests in flight: %v", err)
	default:
	}
	close(g.open)
	if r := <-httpDone; r.status != 200 {
		t.Fatalf("in-flight HTTP request: %d %s", r.status, r.body)
	}
	if err := <-grpcDone; err != nil {
		t.Fatalf("in-flight gRPC call: %v", err)
	}
	select {
	case err := <-h.served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		h.served = nil
	case <-time.After(timing.Patience):
		t.Fatal("Serve did not return")
	}
	// Nothing answers any more.
	cc, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// Refused at once (the call does not wait for a connection); the
	// deadline only bounds a hang.
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	if _, err := rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, rreq(rdesc("user", "x"))); status.Code(err) != codes.Unavailable {
		t.Fatalf("gRPC after Serve returned: %v, want Unavailable (nothing listens)", err)
	}
}

func TestServeReturnsAListenerError(t *testing.T) {
	srv := server.New(server.Options{})
	ln, grpcLn := servicetest.Loopback(t), servicetest.Loopback(t)
	ln.Close() // HTTP cannot accept: Serve stops gRPC and reports it
	err := srv.Serve(context.Background(), ln, grpcLn)
	if err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if c, err := net.DialTimeout("tcp", grpcLn.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("gRPC still accepts")
	}
}

func TestServeWithADoneContext(t *testing.T) {
	srv := server.New(server.Options{})
	httpLn, grpcLn := servicetest.Loopback(t), servicetest.Loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Serve(ctx, httpLn, grpcLn); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := server.New(server.Options{}).Serve(ctx, nil, nil); err != nil {
		t.Fatalf("Serve without listeners: %v", err)
	}
}
