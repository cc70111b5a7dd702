package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/config"
	"github.com/floodgate-io/floodgate/failover"
)

// --max-keys bounds the memory store: with a bound of 64, after 1,000
// distinct keys it holds at most 64.
func TestMaxKeysBoundsTheMemoryStore(t *testing.T) {
	for _, tc := range []struct {
		maxKeys, want int
	}{
		{64, 64},
		{0, 1000}, // unbounded
	} {
		t.Run(fmt.Sprint(tc.maxKeys), func(t *testing.T) {
			st, err := openStores(serveFlags{maxKeys: tc.maxKeys}, failover.FailOpen, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer st.close()
			for i := range 1000 {
				if _, err := st.memory.AllowN(context.Background(), fmt.Sprint("k", i), floodgate.PerHour(1), 1); err != nil {
					t.Fatal(err)
				}
			}
			if n := st.memory.Len(); n != tc.want {
				t.Fatalf("the store holds %d keys, want %d", n, tc.want)
			}
		})
	}
}

// The bound reaches a running serve: with --max-keys 64, a key of a 1/h
// limit is forgotten once 200 other keys came after it, so it passes again
// (unbounded, it would still be denied).
func TestServeMaxKeysForgetsTheOldest(t *testing.T) {
	httpAddr, _, _ := startServe(t, "--max-keys", "64")
	body := func(key string) string {
		return `{"key":"` + key + `","limit":{"algorithm":"fixed_window","rate":1,"period":"1h"}}`
	}
	if code, out := allow(t, httpAddr, body("first")); code != 200 || out["allowed"] != true {
		t.Fatalf("first: %d %v", code, out)
	}
	if code, out := allow(t, httpAddr, body("first")); code != 429 || out["allowed"] != false {
		t.Fatalf("first again, remembered: %d %v", code, out)
	}
	for i := range 200 {
		allow(t, httpAddr, body(fmt.Sprint("other", i)))
	}
	if code, out := allow(t, httpAddr, body("first")); code != 200 || out["allowed"] != true {
		t.Fatalf("first after 200 others, forgotten under --max-keys 64: %d %v", code, out)
	}
}

// The local strategy's memory is bounded too (through openFleet).
func TestMaxKeysBoundsTheLocalStrategy(t *testing.T) {
	set, err := config.Parse("d.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	policies, err := config.NewSet(set)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := openFleet(context.Background(), fleetFlags{strategy: "local", nodes: 1, nodeName: "n"}.withMaxKeys(64), policies, nil, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer fl.close()
	l := fl.For(config.Rule{}, "")
	decide := func(key string) bool {
		d, err := l.AllowN(context.Background(), key, floodgate.PerHour(1), 1)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	if !decide("first") || decide("first") {
		t.Fatal("a 1/h key is not counted")
	}
	for i := range 200 {
		decide(fmt.Sprint("other", i))
	}
	if !decide("first") {
		t.Fatal("the local strategy remembers a key past --max-keys 64 others")
	}
}

func TestNegativeMaxKeysIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--max-keys", "-1"},
		{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--max-keys", "-1"},
	} {
		var errOut bytes.Buffer
		code := Main(context.Background(), args, io.Discard, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "--max-keys -1: want 0 (unbounded) or a positive number") {
			t.Errorf("%s: exit %d, stderr %q; want an error naming --max-keys", args[0], code, errOut.String())
		}
	}
}
