package cluster

import (
	"context"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// BenchmarkLocalAllowN is one decision of a node of 10 on one key: the
// share is computed per decision, on top of the Memory's own work.
func BenchmarkLocalAllowN(b *testing.B) {
	l, err := NewLocal(LocalConfig{Members: &localView{"a", 10, 3}})
	if err != nil {
		b.Fatal(err)
	}
	limit := floodgate.PerSecond(1_000_000_000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.AllowN(ctx, "tenant", limit, 1); err != nil {
			b.Fatal(err)
		}
	}
}
