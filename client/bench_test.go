package client_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate-io/floodgate/client"
)

// canned answers every request with one response, so that a benchmark
// measures the transport's own work, not the network's.
type canned struct{ resp *http.Response }

func (c canned) RoundTrip(*http.Request) (*http.Response, error) { return c.resp, nil }

func okResponse(h http.Header) *http.Response {
	return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody}
}

var overheadCases = []struct {
	name   string
	header http.Header
}{
	{"plain", http.Header{}},
	{"RateLimit r>0", http.Header{"Ratelimit": {`"api";r=42;t=17`}, "Ratelimit-Policy": {`"api";q=100;w=60`}}},
}

// The transport's overhead on an answered request: the throttle, the
// budget's deposit, a look at the RateLimit field.
func BenchmarkRoundTripOverhead(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "http://api.example/v1/items", nil)
	for _, tc := range overheadCases {
		b.Run(tc.name, func(b *testing.B) {
			rt := client.NewTransport(canned{okResponse(tc.header)})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		rt := client.NewTransport(canned{okResponse(http.Header{})})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func TestAnsweredRequestsDoNotAllocate(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://api.example/v1/items", nil)
	for _, tc := range overheadCases {
		rt := client.NewTransport(canned{okResponse(tc.header)})
		rt.RoundTrip(req) // meets the host
		if n := testing.AllocsPerRun(100, func() { rt.RoundTrip(req) }); n != 0 {
			t.Errorf("%s: %.0f allocations per answered request, want 0", tc.name, n)
		}
	}
}
