package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
)

// Redis runs one script at a time, and a script call has a fixed cost
// (reading the command, finding and entering the script, turning each ARGV
// element into a Lua string) that is most of what deciding one request
// costs. So requests that arrive while calls are in flight are gathered and
// sent together, as one call of the algorithm's many-request script
// (many.lua), which decides each in arrival order exactly as the
// single-request script would: group commit. A lone caller is sent at
// once; under load the batches grow by themselves with the wait, so no
// request ever waits for a timer. The caller that starts a batch sends it
// on its own goroutine when its deadline allows waiting for the batch's
// Timeout; otherwise, and for the batches after, a goroutine sends.

// DefaultMaxBatch is the default of Config.MaxBatch.
const DefaultMaxBatch = 128

// maxInFlight is how many batches of one group may be on the wire at once
// while batches are small: a request is then sent at once (alone, as the
// single-request script), so a few callers wait no longer than without
// batching. Once batches grow, inFlightLimit lowers it to 2 so that they
// grow further. Measured on 2 cores: a fixed 2 cost 8 callers a quarter of
// their throughput; a fixed 8 left 64 callers' batches small (more Redis
// work per decision); switching by the last batch's size keeps both.
const maxInFlight = 8

// pending is one caller's request, waiting in a batch.
type pending struct {
	key  string // with the prefix
	c    *compiled
	cost int64
	done chan struct{} // receives one value when d and err are set
	d    floodgate.Decision
	err  error
}

// batcher gathers the requests of one script (and, on a cluster, one hash
// slot: a script's keys must share one).
type batcher struct {
	l      *Limiter
	script *rueidis.Lua
	mu     sync.Mutex
	queue  []*pending
	flying int
	last   int // the size of the last batch taken
}

// slotBatchers are a cluster slot's batchers, one per algorithm.
type slotBatchers [algo.SlidingWindow + 1]*batcher

// batcherFor returns the batcher of a request's algorithm and key (with
// the prefix). On a cluster the slot's batchers are made on first use and
// found again without a lock or an allocation.
func (l *Limiter) batcherFor(c *compiled, key string) *batcher {
	kind := c.params.Kind
	if !l.cluster {
		return l.batchers[kind]
	}
	s := &l.slots[slot(key)]
	if bs := s.Load(); bs != nil {
		return bs[kind]
	}
	bs := new(slotBatchers)
	for k := range bs {
		bs[k] = &batcher{l: l, script: l.scripts.many[k]}
	}
	if !s.CompareAndSwap(nil, bs) {
		bs = s.Load() // another caller made them first
	}
	return bs[kind]
}

// decide queues a request and waits for its decision, or for ctx.
func (b *batcher) decide(ctx context.Context, key string, c *compiled, cost int64) (floodgate.Decision, error) {
	if err := ctx.Err(); err != nil {
		return floodgate.Decision{}, fmt.Errorf("redisstore: key %q: %w", key[len(b.l.cfg.KeyPrefix):], err)
	}
	p := b.l.pendings.Get().(*pending)
	p.key, p.c, p.cost = key, c, cost
	b.mu.Lock()
	b.queue = append(b.queue, p)
	var batch []*pending
	if b.flying < b.inFlightLimit() {
		batch = b.take()
	}
	b.mu.Unlock()
	if batch != nil {
		if b.canLead(ctx) {
			// Send on this goroutine: no hand-off to wait for. The batch
			// is bounded by Timeout, which this caller's deadline allows;
			// the batches after it go to a goroutine of their own.
			b.send(batch)
			if next := b.done(); next != nil {
				go b.run(next)
			}
			<-p.done // sent to by send, above
			return b.l.release(p)
		}
		go b.run(batch)
	}
	select {
	case <-p.done:
		return b.l.release(p)
	case <-ctx.Done():
		// p is not reused: its batch will still write to it.
		// The batch goes on without this caller: its request may still be
		// decided (and counted), as a timed-out single call may have been.
		return floodgate.Decision{}, fmt.Errorf("redisstore: key %q: %w", p.key[len(b.l.cfg.KeyPrefix):], ctx.Err())
	}
}

// canLead reports whether a caller may send a batch itself and wait for
// it: when its context cannot end before the batch's own Timeout would
// (no deadline, or a later one), so that waiting does not hold it past its
// deadline. A context without a deadline that is cancelled waits for the
// batch, at most Timeout.
func (b *batcher) canLead(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) >= b.l.cfg.Timeout
}

// inFlightLimit is how many batches may be on the wire: maxInFlight while
// batches are small (few callers: send at once, as without batching), two
// once they grow (many callers: let requests gather, so that each call
// carries more of them and costs Redis less per decision). The caller
// holds mu.
func (b *batcher) inFlightLimit() int {
	if b.last >= gatherAbove {
		return 2
	}
	return maxInFlight
}

// gatherAbove is the batch size from which requests are left to gather.
const gatherAbove = 4

// take removes the next batch from the queue and counts it in flight; the
// caller holds mu.
func (b *batcher) take() []*pending {
	n := min(len(b.queue), b.l.cfg.MaxBatch)
	batch := make([]*pending, n)
	copy(batch, b.queue)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.flying++
	b.last = n
	return batch
}

// run sends batches until the queue is empty.
func (b *batcher) run(batch []*pending) {
	for batch != nil {
		b.send(batch)
		batch = b.done()
	}
}

// done counts a batch out of flight and takes the next, if any is waiting.
func (b *batcher) done() []*pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flying--
	if len(b.queue) > 0 {
		return b.take()
	}
	return nil
}

// send decides one batch and hands each caller its decision. A batch of
// one goes as the single-request script, which is the cheaper call.
func (b *batcher) send(batch []*pending) {
	l := b.l
	if len(batch) == 1 {
		p := batch[0]
		p.d, _, p.err = l.call(context.Background(), l.scripts.single[p.c.params.Kind], p.key[len(l.cfg.KeyPrefix):], singleArgs(l.now(), p.c, p.cost, l.slack))
		p.done <- struct{}{}
		return
	}
	keys, args := batchCall(l.now(), l.slack, batch)
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	reply, err := b.script.Exec(ctx, l.client, keys, args).AsIntSlice()
	cancel()
	width := manyReplyWidth(batch[0].c.params.Kind)
	if err == nil && len(reply) != width*len(batch)+1 {
		err = fmt.Errorf("redisstore: script replied %d values for %d requests, want %d", len(reply), len(batch), width*len(batch)+1)
	}
	for i, p := range batch {
		if err != nil {
			p.err = l.storeError(context.Background(), p.key[len(l.cfg.KeyPrefix):], err)
		} else {
			p.d, _, p.err = decision(manyDecision(reply, i, width, p.c.params.Limit()))
		}
		p.done <- struct{}{}
	}
}

// batchCall is the KEYS and ARGV of many.lua for a batch: the limits are
// sent once each, and each request names its own only when there are
// several; the cost once when all requests have the same (every ARGV
// element costs Redis a string and the script a conversion).
func batchCall(now, slack string, batch []*pending) (keys, args []string) {
	keys = make([]string, len(batch))
	var limits []*compiled
	which := make([]int, len(batch))
	for i, p := range batch {
		keys[i] = p.key
		at := -1
		for j, c := range limits {
			if c == p.c {
				at = j
				break
			}
		}
		if at < 0 {
			at = len(limits)
			limits = append(limits, p.c)
		}
		which[i] = at + 1
	}
	width := len(batch[0].c.single)
	args = make([]string, 0, 3+len(limits)*width+2*len(batch))
	args = append(args, now, slack, strconv.Itoa(len(limits)))
	for _, c := range limits {
		args = append(args, c.single...)
	}
	if sameCost(batch) {
		args = append(args, strconv.FormatInt(batch[0].cost, 10))
	} else {
		for _, p := range batch {
			args = append(args, strconv.FormatInt(p.cost, 10))
		}
	}
	if len(limits) > 1 {
		for _, w := range which {
			args = append(args, strconv.Itoa(w))
		}
	}
	return keys, args
}

// sameCost reports whether a batch of more than one request costs the same
// throughout (a batch of one sends its cost as a list of one: the same).
func sameCost(batch []*pending) bool {
	for _, p := range batch[1:] {
		if p.cost != batch[0].cost {
			return false
		}
	}
	return len(batch) > 1
}

// manyReplyWidth is how many values many.lua replies per request of an
// algorithm: the buckets send their delay, the windows have none.
func manyReplyWidth(k algo.Kind) int {
	if k.IsBucket() {
		return 4
	}
	return 3
}

// manyDecision puts request i's values of a many.lua reply in the order of
// the single-request scripts' reply, with what the script leaves out.
func manyDecision(reply []int64, i, width int, limit int64) []int64 {
	v := reply[width*i : width*i+width]
	var delay int64
	if width == 4 {
		delay = v[3]
	}
	return []int64{v[0] & 1, limit, v[0] >> 1, v[1], v[2], delay, reply[len(reply)-1]}
}

// release returns a pending request's outcome and the pending itself to
// the pool: a caller that waited to the end (one that gave up leaves its
// pending to the batch still writing to it).
func (l *Limiter) release(p *pending) (floodgate.Decision, error) {
	d, err := p.d, p.err
	*p = pending{done: p.done}
	l.pendings.Put(p)
	return d, err
}
