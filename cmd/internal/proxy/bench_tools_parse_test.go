package proxy_test

import (
	"testing"
	"time"
)

// The benchmark reads wrk's report: totals, errors, throughput, p99.
func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want wrkResult
	}{
		{"with refusals", `Running 10s test @ http://127.0.0.1:8080/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.21ms    1.02ms  25.11ms   80.00%
  Latency Distribution
     50%    3.01ms
     75%    3.55ms
     90%    4.20ms
     99%    7.89ms
  203456 requests in 10.01s, 30.12MB read
  Non-2xx or 3xx responses: 198440
Requests/sec:  20325.27
Transfer/sec:      3.01MB
`, wrkResult{Requests: 203456, Non2xx: 198440, Seconds: 10.01, RPS: 20325.27, P99: 7890 * time.Microsecond}},
		{"all admitted, microseconds", `  Latency Distribution
     50%  812.00us
     99%    1.20s
  1500 requests in 1.00m, 1.00MB read
Requests/sec:     25.00
`, wrkResult{Requests: 1500, Seconds: 60, RPS: 25, P99: 1200 * time.Millisecond}},
	} {
		got, err := parseWrk(tc.out)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Error("a failed run parsed")
	}
}
