package assemble

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// MaxKeys (--max-keys) bounds the memory store: with a bound of 64,
// after 1,000 distinct keys it holds at most 64.
func TestMaxKeysBoundsTheMemoryStore(t *testing.T) {
	for _, tc := range []struct {
		maxKeys, want int
	}{
		{64, 64},
		{0, 1000}, // unbounded
	} {
		t.Run(fmt.Sprint(tc.maxKeys), func(t *testing.T) {
			st, err := Open(context.Background(), Config{MaxKeys: tc.maxKeys,
				Fleet: FleetConfig{Strategy: "exact", Nodes: 1, NodeName: "n"}}, nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
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

// The local strategy's memory is bounded too.
func TestMaxKeysBoundsTheLocalStrategy(t *testing.T) {
	set, err := config.Parse("d.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	policies, err := policy.NewSet(set)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(context.Background(), Config{StoreTimeout: time.Second, MaxKeys: 64,
		Fleet: FleetConfig{Strategy: "local", Nodes: 1, NodeName: "n"}}, policies, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := st.For(policy.Rule{})
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
