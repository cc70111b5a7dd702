package loadgen

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The call log has every answered and failed call, in the order the calls
// started, each with its latency and outcome; its counts are the report's.
func TestCallLogListsEveryCallInOrder(t *testing.T) {
	_, addr := startGRPC(t)
	var log strings.Builder
	r, err := Run(t.Context(), patient(Config{Target: TargetGRPC, Addr: addr, Concurrency: 8, Requests: 300, CallLog: &log}))
	if err != nil {
		t.Fatal(err)
	}
	calls := readCallLog(t, log.String())
	if int64(len(calls)) != r.Calls {
		t.Fatalf("the log has %d calls, the report %d", len(calls), r.Calls)
	}
	count := map[string]int64{}
	for i, c := range calls {
		count[c.outcome]++
		if i > 0 && c.start < calls[i-1].start {
			t.Fatalf("call %d started at %d, before the call above it (%d)", i, c.start, calls[i-1].start)
		}
		if c.latency <= 0 || c.latency > r.Max {
			t.Errorf("call %d: latency %v outside (0, the report's max %v]", i, c.latency, r.Max)
		}
	}
	if count["allowed"] != r.Allowed || count["denied"] != r.Denied || count["error"] != r.Errors {
		t.Errorf("the log counts %v, the report allowed %d denied %d errors %d", count, r.Allowed, r.Denied, r.Errors)
	}
}

// Past its bound a worker's log counts the calls it leaves out, and the
// log's last line says how many.
func TestCallLogBoundIsStated(t *testing.T) {
	l := &callLog{room: 2}
	start := time.Unix(100, 0)
	l.record(start.Add(2), time.Millisecond, outcomeDenied)
	l.record(start.Add(1), 2*time.Millisecond, outcomeAllowed)
	l.record(start, 3*time.Millisecond, outcomeError)
	var out strings.Builder
	if err := writeCallLog(&out, []*callLog{l, {}}); err != nil {
		t.Fatal(err)
	}
	want := "# start_unix_ns latency_ns outcome\n" +
		"100000000001 2000000 allowed\n" +
		"100000000002 1000000 denied\n" +
		"# 1 more calls are not in the log: it holds at most " + strconv.Itoa(MaxCallLog) + "\n"
	if out.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", out.String(), want)
	}
}

// Without a log, recording keeps nothing.
func TestNoCallLogKeepsNothing(t *testing.T) {
	var l callLog
	l.record(time.Now(), time.Millisecond, outcomeAllowed)
	if len(l.records) != 0 || l.dropped != 0 {
		t.Errorf("a worker without a log kept %d calls and dropped %d", len(l.records), l.dropped)
	}
}

type loggedCall struct {
	start   int64
	latency time.Duration
	outcome string
}

func readCallLog(t *testing.T, log string) []loggedCall {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log))
	if !sc.Scan() || sc.Text() != "# start_unix_ns latency_ns outcome" {
		t.Fatalf("the log does not start with its header: %q", sc.Text())
	}
	var calls []loggedCall
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			t.Fatalf("line %q: want three fields", sc.Text())
		}
		start, err1 := strconv.ParseInt(f[0], 10, 64)
		lat, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %q: %v %v", sc.Text(), err1, err2)
		}
		calls = append(calls, loggedCall{start, time.Duration(lat), f[2]})
	}
	return calls
}
