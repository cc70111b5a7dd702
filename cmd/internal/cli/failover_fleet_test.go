package cli

import (
	"testing"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

// TestServeFailLocalSharesTheLimitByTheFleet: with Redis down, fail_local
// enforces the limit divided by the fleet's size, so that --nodes nodes
// together stay near the limit, for the exact store and for leased alike
// (leased reaches the failure policy once its renewal is refused).
func TestServeFailLocalSharesTheLimitByTheFleet(t *testing.T) {
	const body = `{"key":"k","limit":{"algorithm":"fixed_window","rate":100,"period":"1h"}}`
	for _, strategy := range []string{"exact", "leased"} {
		t.Run(strategy, func(t *testing.T) {
			srv := testkit.StartServer(t)
			httpAddr, _, _ := startServe(t, "--redis", srv.Addr(), "--strategy", strategy, "--nodes", "4",
				"--failure-mode", "fail_local", "--outage-after", "1s")
			srv.Kill()
			ok := 0
			for range 60 {
				if code, _ := allow(t, httpAddr, body); code == 200 {
					ok++
				}
			}
			if ok != 25 {
				t.Errorf("admitted %d of 60 with Redis down, want 100/4 = 25", ok)
			}
		})
	}
}
