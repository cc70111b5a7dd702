package cli

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// hourPolicy is one limit of a request an hour on key in domain d.
func hourPolicy(key string) string {
	return "domain: d\ndescriptors:\n  - key: " + key + "\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
}

// Over real gRPC, the second request of an hour that allows one is a
// denial that --shadow-mode answers OK and --quota-mode leaves over the
// limit (its one descriptor, a quota, is over), as envoyproxy/ratelimit's
// SHADOW_MODE and QUOTA_MODE do; the modes outlive a reload.
func TestServeGlobalModes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want pb.RateLimitResponse_Code // of the second request
	}{
		{name: "no mode", want: pb.RateLimitResponse_OVER_LIMIT},
		{name: "shadow mode", args: []string{"--shadow-mode"}, want: pb.RateLimitResponse_OK},
		{name: "quota mode", args: []string{"--quota-mode"}, want: pb.RateLimitResponse_OVER_LIMIT},
		{name: "both: shadow wins", args: []string{"--shadow-mode", "--quota-mode"}, want: pb.RateLimitResponse_OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOfWindowEdge(t, time.Hour)
			file := writePolicy(t, hourPolicy("k"))
			httpAddr, grpcAddr, logs := startServe(t, append([]string{"--config", file, "--admin-token", "tok"}, tt.args...)...)
			twice := func(key string) {
				t.Helper()
				if r := shouldRateLimit(t, grpcAddr, "d", key, "v"); r.OverallCode != pb.RateLimitResponse_OK {
					t.Fatalf("%s: first request of the hour: %v", key, r)
				}
				if r := shouldRateLimit(t, grpcAddr, "d", key, "v"); r.OverallCode != tt.want {
					t.Fatalf("%s: second request of the hour: %v, want %v", key, r, tt.want)
				}
			}
			twice("k")

			if err := os.WriteFile(file, []byte(hourPolicy("k2")), 0o644); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/admin/reload", nil)
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(logs.String(), "config reloaded") {
				t.Fatalf("POST /admin/reload: %d; logs:\n%s", resp.StatusCode, logs)
			}
			twice("k2")
		})
	}
}
