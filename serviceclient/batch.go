package serviceclient

import (
	"context"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// batcher gathers the descriptors of concurrent calls for one domain into
// one ShouldRateLimit. The first call of a batch leads it: it waits up to
// MaxWait for others (less if the batch fills), sends it, and hands each
// member its slice of the answer.
type batcher struct {
	cfg  Batch
	send func(context.Context, string, []*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error)

	mu   sync.Mutex
	open map[string]*batch // the batch still taking members, by domain
}

type batch struct {
	descs []*ratelimitv3.RateLimitDescriptor
	full  chan struct{} // closed when the batch takes no more members
	done  chan struct{} // closed when resp and err are set
	resp  *rlsv3.RateLimitResponse
	err   error
}

func newBatcher(cfg Batch, send func(context.Context, string, []*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error)) *batcher {
	return &batcher{cfg: cfg, send: send, open: map[string]*batch{}}
}

// do decides descs within a batch and returns their statuses. The wait is
// bounded by MaxWait, then the call's own timeout; a member whose ctx ends
// first leaves with its error (the batch still goes).
func (b *batcher) do(ctx context.Context, domain string, descs []*ratelimitv3.RateLimitDescriptor) ([]*rlsv3.RateLimitResponse_DescriptorStatus, error) {
	bt, at, lead := b.join(domain, descs)
	if lead {
		b.lead(ctx, domain, bt)
	}
	select {
	case <-bt.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if bt.err != nil {
		return nil, bt.err
	}
	return bt.resp.GetStatuses()[at : at+len(descs)], nil
}

// join adds descs to the domain's open batch, or opens one (then the
// caller leads it). It returns the batch and where descs start in it.
func (b *batcher) join(domain string, descs []*ratelimitv3.RateLimitDescriptor) (bt *batch, at int, lead bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt = b.open[domain]
	if bt != nil && len(bt.descs)+len(descs) > b.cfg.MaxDescriptors {
		b.closeLocked(domain, bt) // no room: its leader sends it now
		bt = nil
	}
	if bt == nil {
		bt = &batch{full: make(chan struct{}), done: make(chan struct{})}
		b.open[domain] = bt
		lead = true
	}
	at = len(bt.descs)
	bt.descs = append(bt.descs, descs...)
	if len(bt.descs) >= b.cfg.MaxDescriptors {
		b.closeLocked(domain, bt)
	}
	return bt, at, lead
}

func (b *batcher) closeLocked(domain string, bt *batch) {
	if b.open[domain] == bt {
		delete(b.open, domain)
		close(bt.full)
	}
}

// lead waits for the batch to fill or MaxWait to pass, then sends it. The
// call does not end with the leader's context: others wait for it.
func (b *batcher) lead(ctx context.Context, domain string, bt *batch) {
	t := time.NewTimer(b.cfg.MaxWait)
	select {
	case <-bt.full:
	case <-t.C:
	}
	t.Stop()
	b.mu.Lock()
	b.closeLocked(domain, bt)
	b.mu.Unlock()
	bt.resp, bt.err = b.send(context.WithoutCancel(ctx), domain, bt.descs)
	close(bt.done)
}
