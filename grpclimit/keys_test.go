package grpclimit

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

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

// A key the caller's metadata makes longer than floodgate.MaxKeyBytes is
// InvalidArgument with a short message naming the limit, decided before
// the store is asked (so every store answers alike); the handler never runs.
func TestDerivedKeyPolicy(t *testing.T) {
	_, mem := manual()
	store := &counting{Limiter: mem}
	rule := Rule{Name: "key", Limit: floodgate.PerSecond(100), Key: ByMetadata("X-Api-Key")}
	c, svc := serve(t, store, Options{Rules: []Rule{rule}})
	ctx := ctxT(t)
	fits := strings.Repeat("k", floodgate.MaxKeyBytes-len("key:"))
	if _, err := call(withMD(ctx, "x-api-key", fits), c); err != nil {
		t.Fatalf("a key of the maximum length: %v", err)
	}
	_, err := call(withMD(ctx, "x-api-key", strings.Repeat("k", 100<<10)), c)
	st := wantCode(t, err, codes.InvalidArgument)
	switch msg := st.Message(); {
	case len(msg) > 300:
		t.Fatalf("a message of %d bytes echoes the key", len(msg))
	case !strings.Contains(msg, `rule "key": key "key:kkkk`) || !strings.Contains(msg, "(102404 bytes) is longer than 4096 bytes"):
		t.Fatalf("message %q does not name the rule, the size and the limit", msg)
	}
	if n := store.asked.Load(); n != 1 {
		t.Errorf("the store was asked %d times, want once (for the key that fits)", n)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}
