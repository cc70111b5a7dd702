package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// ShouldRateLimit reads each request into reused memory, answers from
// reused memory, and decides in the engine's reused memory (its request,
// its reply, engine.Response.Release). Concurrent calls must still each
// get the answer to their own request: here every descriptor carries a
// limit override of its own size, which its status echoes back as
// current_limit, with the remaining count that limit leaves.
func TestConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	h := newHarness(t, setup{})
	const callers, calls = 8, 200
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				n := uint32(1000 + c*calls + i) // unique to this call
				req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
					overridden(fmt.Sprint("a", n), n), overridden(fmt.Sprint("b", n), n+1),
				}}
				ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
				resp, err := h.rls.ShouldRateLimit(ctx, req)
				cancel()
				if err != nil {
					t.Errorf("call %d: %v", n, err)
					return
				}
				if err := ownAnswer(resp, n); err != nil {
					t.Errorf("call %d: %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// overridden is a descriptor user=value with a per-minute override of n.
func overridden(value string, n uint32) *ratelimitv3.RateLimitDescriptor {
	d := rdesc("user", value)
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_MINUTE}
	return d
}

// ownAnswer checks that resp answers the request of call n: its two
// statuses, in order, are those of overrides n and n+1, each with one
// request counted.
func ownAnswer(resp *rlsv3.RateLimitResponse, n uint32) error {
	if resp.OverallCode != OK || len(resp.Statuses) != 2 {
		return fmt.Errorf("answer %v, want OK with two statuses", resp)
	}
	for i, st := range resp.Statuses {
		want := n + uint32(i)
		if st.GetCurrentLimit().GetRequestsPerUnit() != want || st.GetLimitRemaining() != want-1 {
			return fmt.Errorf("status %d is %v, want the limit %d with %d remaining", i, st, want, want-1)
		}
	}
	return nil
}
