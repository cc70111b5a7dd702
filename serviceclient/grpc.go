package serviceclient

import (
	"context"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// decideGRPC asks ShouldRateLimit, in a batch when Options.Batch is set.
func (c *Client) decideGRPC(ctx context.Context, domain string, descs []Descriptor, cost int64) (Result, error) {
	msgs := make([]*ratelimitv3.RateLimitDescriptor, len(descs))
	for i, d := range descs {
		msgs[i] = descriptorMsg(d, cost)
	}
	var statuses []*rlsv3.RateLimitResponse_DescriptorStatus
	var overall bool
	if c.batch != nil {
		var err error
		if statuses, err = c.batch.do(ctx, domain, msgs); err != nil {
			return Result{}, err
		}
		overall = true
		for _, st := range statuses {
			overall = overall && st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT
		}
	} else {
		resp, err := c.sendRLS(ctx, domain, msgs)
		if err != nil {
			return Result{}, err
		}
		statuses, overall = resp.GetStatuses(), resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT
	}
	r := Result{Allowed: overall, Descriptors: make([]DescriptorResult, len(statuses))}
	for i, st := range statuses {
		r.Descriptors[i] = statusResult(st)
	}
	c.learned.learnGRPC(domain, descs, statuses)
	return r, nil
}

// descriptorMsg is d as Envoy's message, its cost as the descriptor's own
// hits_addend so that descriptors of different costs share a batch.
func descriptorMsg(d Descriptor, cost int64) *ratelimitv3.RateLimitDescriptor {
	m := &ratelimitv3.RateLimitDescriptor{
		Entries:    make([]*ratelimitv3.RateLimitDescriptor_Entry, len(d.Entries)),
		HitsAddend: wrapperspb.UInt64(uint64(cost)),
	}
	for j, e := range d.Entries {
		m.Entries[j] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value}
	}
	return m
}

func statusResult(st *rlsv3.RateLimitResponse_DescriptorStatus) DescriptorResult {
	r := DescriptorResult{Allowed: st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT, Remaining: int64(st.GetLimitRemaining())}
	if l := st.GetCurrentLimit(); l != nil {
		r.Limited, r.Name, r.Limit = true, l.GetName(), int64(l.GetRequestsPerUnit())
		r.ResetAfter = st.GetDurationUntilReset().AsDuration()
	} else {
		r.Remaining = 0 // no limit: the service's "all remaining" says nothing
	}
	return r
}

// sendRLS makes one ShouldRateLimit call within the timeout. Its answer
// has one status per descriptor, or it is an error: ErrRejected for a
// request the service refused (InvalidArgument), else the service
// unavailable.
func (c *Client) sendRLS(ctx context.Context, domain string, descs []*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	resp, err := c.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
			return nil, fmt.Errorf("%w: %s", ErrRejected, st.Message())
		}
		return nil, unavailable(err)
	}
	if len(resp.GetStatuses()) != len(descs) {
		return nil, unavailable(fmt.Errorf("the service answered %d descriptors for %d", len(resp.GetStatuses()), len(descs)))
	}
	return resp, nil
}
