package httplimit

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// counting is a Limiter that counts the decisions it is asked for.
type counting struct {
	floodgate.Limiter
	asked atomic.Int64
}

func (c *counting) AllowN(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
	c.asked.Add(1)
	return c.Limiter.AllowN(ctx, key, l, cost)
}

// A key a request makes longer than floodgate.MaxKeyBytes (here from a
// header) is the request's fault: 400 with a short problem naming the
// policy and the limit, before any store is asked, so that every store
// answers alike (a store error would be OnError's 503).
func TestDerivedKeyPolicy(t *testing.T) {
	store := &counting{Limiter: floodgate.NewMemory()}
	url := serve(t, store, Options{Rules: []Rule{{Name: "key", Limit: floodgate.PerSecond(100), Key: ByHeader("X-API-Key")}}}, nil)
	if r := get(t, url, "X-API-Key", strings.Repeat("k", floodgate.MaxKeyBytes-len("key:"))); r.status != http.StatusOK {
		t.Fatalf("a key of the maximum length: %d %.200s", r.status, r.body)
	}
	r := get(t, url, "X-API-Key", strings.Repeat("k", 100<<10))
	switch {
	case r.status != http.StatusBadRequest:
		t.Fatalf("%d %.200s, want 400", r.status, r.body)
	case len(r.body) > 400:
		t.Fatalf("a problem of %d bytes echoes the key", len(r.body))
	case !strings.Contains(r.body, `rate limit policy \"key\": key \"key:kkkk`) || !strings.Contains(r.body, "(102404 bytes) is longer than 4096 bytes"):
		t.Fatalf("problem %s does not name the policy, the size and the limit", r.body)
	}
	if n := store.asked.Load(); n != 1 {
		t.Errorf("the store was asked %d times, want once (for the key that fits)", n)
	}
}
