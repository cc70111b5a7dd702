package loadgen

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var sample = Report{
	Target: TargetGRPC, Addr: "127.0.0.1:8081", Concurrency: 16, Stopped: StopDuration,
	Calls: 123456, Allowed: 82304, Denied: 41150, Errors: 2,
	Elapsed: 10*time.Second + 2345678*time.Nanosecond,
	Min:     41234, Mean: 120456, P50: 110987, P90: 181234, P99: 423456, Max: 3212345,
	FirstError: "rpc error: code = Unavailable desc = connection refused",
}

func TestReportText(t *testing.T) {
	var buf bytes.Buffer
	if err := sample.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	want := `target   grpc 127.0.0.1:8081  (16 workers, closed loop)
elapsed  10.002s              (stopped: duration)
calls    123456               12342.7/s
allowed  82304                66.7%
denied   41150                33.3%
errors   2                    0.0%
latency  min     mean   p50    p90    p99    max
         41.2µs  120µs  111µs  181µs  423µs  3.21ms
first error: rpc error: code = Unavailable desc = connection refused
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}

	open := Report{Target: TargetHTTP, Addr: "127.0.0.1:8080", Concurrency: 4, Rate: 1500.5, Stopped: StopRequests}
	buf.Reset()
	if err := open.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"open loop at 1500.5/s", "stopped: requests", "calls    0", "min  mean  p50  p90  p99  max\n         -    -     -    -    -    -\n"} {
		if !strings.Contains(buf.String(), frag) {
			t.Errorf("empty report lacks %q:\n%s", frag, buf.String())
		}
	}
	if strings.Contains(buf.String(), "first error") {
		t.Errorf("report without errors shows a first error:\n%s", buf.String())
	}
}

func TestReportJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := sample.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%v in %s", err, buf.String())
	}
	for key, want := range map[string]any{
		"target": "grpc", "addr": "127.0.0.1:8081", "concurrency": 16.0, "rate": 0.0, "stopped": "duration",
		"calls": 123456.0, "allowed": 82304.0, "denied": 41150.0, "errors": 2.0,
		"elapsed_ns": 10002345678.0, "first_error": sample.FirstError,
	} {
		if m[key] != want {
			t.Errorf("%s = %v, want %v", key, m[key], want)
		}
	}
	if cps := m["calls_per_second"].(float64); cps < 12342 || cps > 12343 {
		t.Errorf("calls_per_second = %v", cps)
	}
	lat := m["latency_ns"].(map[string]any)
	if lat["p99"] != 423456.0 || lat["max"] != 3212345.0 || lat["min"] != 41234.0 {
		t.Errorf("latency_ns = %v", lat)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back != sample {
		t.Errorf("round trip:\n got %+v, %v\nwant %+v", back, err, sample)
	}
	if !strings.HasSuffix(buf.String(), "}\n") {
		t.Errorf("JSON report does not end in a newline: %q", buf.String())
	}
}

func TestCallsPerSecond(t *testing.T) {
	if got := (Report{Calls: 500, Elapsed: 2 * time.Second}).CallsPerSecond(); got != 250 {
		t.Errorf("500 calls in 2s: %v/s", got)
	}
	if got := (Report{Calls: 5}).CallsPerSecond(); got != 0 {
		t.Errorf("no elapsed time: %v/s", got)
	}
}
