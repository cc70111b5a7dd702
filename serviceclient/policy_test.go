package serviceclient_test

import (
	"testing"

	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/serviceclient"
)

func failoverConfig(mode string) failover.Config { return failover.Config{Mode: failover.Mode(mode)} }

// Policy decisions over HTTP and over gRPC follow the service's policy:
// 3 a minute per user, then over the limit.
func TestPolicyDecisionsAreTheService(t *testing.T) {
	srv := startServe(t)
	for _, tc := range []struct {
		name string
		opts serviceclient.Options
	}{
		{"http", serviceclient.Options{HTTP: srv.HTTP, CacheSize: -1}},
		{"grpc", serviceclient.Options{GRPCAddr: srv.GRPC, CacheSize: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.opts)
			want := []struct {
				allowed   bool
				remaining int64
			}{{true, 2}, {true, 1}, {true, 0}, {false, 0}}
			for i, w := range want {
				r, err := c.Decide(patient(t), "shop", user("bob-"+tc.name), 1)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				d := r.Descriptors[0]
				if r.Allowed != w.allowed || d.Allowed != w.allowed || d.Remaining != w.remaining || d.Limit != 3 || !d.Limited || d.Name != "per-user" {
					t.Errorf("request %d: %+v, want allowed %v, remaining %d of per-user's 3", i, r, w.allowed, w.remaining)
				}
			}
		})
	}
}
