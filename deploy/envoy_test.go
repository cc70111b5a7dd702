package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

const (
	envoyConfig   = "envoy/envoy.yaml"
	composePolicy = "compose/policy" // the directory compose mounts at /etc/floodgate
)

// loadBootstrap reads envoy.yaml as Envoy would: YAML to JSON to the v3
// Bootstrap, every typed_config resolved (the extension packages are
// imported for that), unknown fields refused.
func loadBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	raw, err := os.ReadFile(envoyConfig)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", envoyConfig, err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("%s is not a v3 Bootstrap: %v", envoyConfig, err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", envoyConfig, err)
	}
	return &b
}

// edge is the listener that asks Floodgate: its connection manager and
// the rate limit filter in it.
func edge(t *testing.T, b *bootstrapv3.Bootstrap) (*hcmv3.HttpConnectionManager, *ratelimitv3.RateLimit) {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != "edge" {
			continue
		}
		var hcm hcmv3.HttpConnectionManager
		if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
			t.Fatalf("listener edge: %v", err)
		}
		if err := hcm.ValidateAll(); err != nil {
			t.Fatalf("listener edge: %v", err)
		}
		for _, f := range hcm.GetHttpFilters() {
			var rl ratelimitv3.RateLimit
			if f.GetTypedConfig().MessageIs(&rl) {
				if err := f.GetTypedConfig().UnmarshalTo(&rl); err != nil {
					t.Fatal(err)
				}
				if err := rl.ValidateAll(); err != nil {
					t.Fatalf("ratelimit filter: %v", err)
				}
				return &hcm, &rl
			}
		}
		t.Fatal("listener edge has no envoy.filters.http.ratelimit filter")
	}
	t.Fatalf("%s has no listener named edge", envoyConfig)
	return nil, nil
}

func TestEnvoyAsksFloodgateOverGRPC(t *testing.T) {
	b := loadBootstrap(t)
	_, rl := edge(t, b)
	svc := rl.GetRateLimitService()
	if svc.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("rate_limit_service transport_api_version %v, want V3", svc.GetTransportApiVersion())
	}
	cluster := svc.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if rl.GetDomain() != "edge" || cluster != "floodgate" {
		t.Fatalf("ratelimit filter: domain %q, cluster %q; want edge and floodgate", rl.GetDomain(), cluster)
	}
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != cluster {
			continue
		}
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if sa.GetAddress() != "floodgate" || sa.GetPortValue() != 8081 {
			t.Errorf("cluster floodgate points at %s:%d, want floodgate:8081 (the compose service's gRPC port)", sa.GetAddress(), sa.GetPortValue())
		}
		var opts upstreamhttpv3.HttpProtocolOptions
		if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&opts); err != nil {
			t.Fatalf("cluster floodgate: no HttpProtocolOptions: %v", err)
		}
		if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
			t.Error("cluster floodgate does not speak HTTP/2: gRPC needs it")
		}
		return
	}
	t.Fatalf("no cluster %q", cluster)
}

// request is the request Envoy rates: its client address and headers.
type request struct {
	remote  string
	headers map[string]string
}

// descriptors builds what Envoy sends for req on route r: one descriptor
// per rate_limits entry whose every action yields an entry (Envoy drops the
// others). Only the actions envoy.yaml uses are known; another fails the test.
func descriptors(t *testing.T, r *routev3.Route, req request) []*commonrl.RateLimitDescriptor {
	t.Helper()
	var out []*commonrl.RateLimitDescriptor
	for _, limit := range r.GetRoute().GetRateLimits() {
		d := &commonrl.RateLimitDescriptor{}
		for _, a := range limit.GetActions() {
			var e *commonrl.RateLimitDescriptor_Entry
			switch {
			case a.GetRemoteAddress() != nil:
				e = &commonrl.RateLimitDescriptor_Entry{Key: "remote_address", Value: req.remote}
			case a.GetGenericKey() != nil:
				key := a.GetGenericKey().GetDescriptorKey()
				if key == "" {
					key = "generic_key"
				}
				e = &commonrl.RateLimitDescriptor_Entry{Key: key, Value: a.GetGenericKey().GetDescriptorValue()}
			case a.GetRequestHeaders() != nil:
				if v, ok := req.headers[a.GetRequestHeaders().GetHeaderName()]; ok {
					e = &commonrl.RateLimitDescriptor_Entry{Key: a.GetRequestHeaders().GetDescriptorKey(), Value: v}
				}
			default:
				t.Fatalf("route %s: action %v is not modelled by this test", r.GetMatch(), a)
			}
			if e == nil {
				d = nil
				break
			}
			d.Entries = append(d.Entries, e)
		}
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

// Every descriptor the routes send meets a limit of the compose policy:
// none falls through unlimited because of a misspelt key, and the login
// route's limit trips where the policy says.
func TestEnvoyDescriptorsMeetThePolicy(t *testing.T) {
	if out, err := exec.Command(floodgateBin, "config", "check", composePolicy).CombinedOutput(); err != nil {
		t.Fatalf("floodgate config check %s: %v\n%s", composePolicy, err, out)
	}
	hcm, rl := edge(t, loadBootstrap(t))
	srv := startServe(t, "--config", composePolicy)
	conn, err := grpc.NewClient(srv.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ask := func(ds []*commonrl.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: rl.GetDomain(), Descriptors: ds, HitsAddend: 1})
		if err != nil {
			t.Fatalf("ShouldRateLimit(%v): %v", ds, err)
		}
		return resp
	}

	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	loginChecked := false
	for i, r := range routes {
		// A client per route, so that one route's requests leave the
		// next route's limits alone.
		req := request{remote: fmt.Sprintf("192.0.2.%d", 10+i), headers: map[string]string{"x-api-key": fmt.Sprintf("key-%d", i)}}
		ds := descriptors(t, r, req)
		if len(r.GetRoute().GetRateLimits()) == 0 {
			continue // not limited on purpose (/healthz)
		}
		if len(ds) != len(r.GetRoute().GetRateLimits()) {
			t.Fatalf("route %s: %d descriptors for %d rate_limits entries: a request with every header should fill them all", r.GetMatch(), len(ds), len(r.GetRoute().GetRateLimits()))
		}
		for j, st := range ask(ds).GetStatuses() {
			if st.GetCurrentLimit() == nil {
				t.Errorf("route %s: descriptor %v meets no limit of %s", r.GetMatch(), ds[j].GetEntries(), composePolicy)
			}
		}
		if r.GetMatch().GetPrefix() == "/login" {
			loginChecked = true
			// The policy allows 3 logins a minute per address: this was
			// the first; two more pass, the fourth is refused.
			codes := []rlsv3.RateLimitResponse_Code{ask(ds).GetOverallCode(), ask(ds).GetOverallCode(), ask(ds).GetOverallCode()}
			want := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}
			for k := range codes {
				if codes[k] != want[k] {
					t.Errorf("login %d of a minute: %v, want %v", k+2, codes[k], want[k])
				}
			}
		}
	}
	if !loginChecked {
		t.Error("envoy.yaml has no /login route: the policy's login limit is never asked for")
	}
}
