package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
)

// Dialing in the background (Config.DialInBackground): a service that
// starts while its Redis is down (a pod scheduled before the Redis pod,
// a managed Redis in maintenance) serves at once, each limit under its
// failure policy, and counts in Redis as soon as Redis answers.
//
// rueidis builds no client without a server that answers, so the Limiter
// starts on a stand-in: a client whose every dial fails at once with
// errNotConnected, which gives the Limiter (and the cluster strategies,
// through Client) the command builder they need and an error for every
// call. A goroutine dials the real client meanwhile, with the same
// options, and swaps it in once it answers.

const (
	// firstRedial and maxRedial pace the background dials: quick at
	// first (a Redis that starts beside the service), then once a
	// second, so that a long outage costs a dial a second.
	firstRedial = 50 * time.Millisecond
	maxRedial   = time.Second
	// noSlot is the bit that rueidis's standalone and Sentinel builders
	// set in a command's slot (cmds.NoSlot). A command built before the
	// swap carries it; a Cluster client would route it to no node.
	noSlot = uint16(1 << 15)
)

// errNotConnected is every call's error until the background dial
// succeeds.
var errNotConnected = fmt.Errorf("%w: not connected yet (dialing in the background)", floodgate.ErrStoreUnavailable)

// Unreachable reports whether err, from New, says that no Redis answered
// (refused, timed out, no route, no socket yet): the errors that waiting
// may mend. A Redis that answers and refuses (a wrong password, an
// unknown master set), or a certificate that does not verify, is not
// unreachable: retrying it mends nothing.
func Unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// standIn is the client of a Limiter whose Redis has not answered yet:
// every dial fails at once with errNotConnected, so every call does.
func standIn(opt rueidis.ClientOption) rueidis.Client {
	opt.InitAddress = opt.InitAddress[:1]
	opt.ForceSingleClient = true
	opt.Sentinel = rueidis.SentinelOption{}
	opt.DialCtxFn = func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
		return nil, errNotConnected
	}
	// With ForceSingleClient, rueidis returns the client along with the
	// failed dial's error, which is the point.
	c, _ := rueidis.NewClient(opt)
	return c
}

// swapClient is a rueidis.Client that is the stand-in until the real
// client is swapped in.
type swapClient struct {
	cur     atomic.Pointer[rueidis.Client]
	cluster atomic.Bool // the real client is a Redis Cluster's
	real    atomic.Bool // the real client is in

	mu     sync.Mutex
	closed bool
}

func newSwapClient(standIn rueidis.Client) *swapClient {
	s := &swapClient{}
	s.cur.Store(&standIn)
	return s
}

// swap makes c the client, closing the stand-in; it reports false (and
// closes c) when the swapClient was closed meanwhile.
func (s *swapClient) swap(c rueidis.Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.cluster.Store(c.Mode() == rueidis.ClientModeCluster)
	old := s.cur.Swap(&c)
	s.real.Store(true)
	(*old).Close()
	return true
}

func (s *swapClient) client() rueidis.Client { return *s.cur.Load() }

// stale reports a command built by the stand-in's builder that would
// reach a Cluster client, which cannot route it: it fails like the
// stand-in's calls, and the next one is built right.
func (s *swapClient) stale(cmd rueidis.Completed) bool {
	return cmd.Slot()&noSlot != 0 && s.cluster.Load()
}

func (s *swapClient) B() rueidis.Builder { return s.client().B() }

func (s *swapClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if s.stale(cmd) {
		return rueidis.NewErrorResult(errNotConnected)
	}
	return s.client().Do(ctx, cmd)
}

func (s *swapClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range multi {
		if s.stale(cmd) {
			out := make([]rueidis.RedisResult, len(multi))
			for i := range out {
				out[i] = rueidis.NewErrorResult(errNotConnected)
			}
			return out
		}
	}
	return s.client().DoMulti(ctx, multi...)
}

func (s *swapClient) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	return s.client().Receive(ctx, subscribe, fn)
}

func (s *swapClient) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	return s.client().DoCache(ctx, cmd, ttl)
}

func (s *swapClient) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	return s.client().DoMultiCache(ctx, multi...)
}

func (s *swapClient) DoStream(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResultStream {
	return s.client().DoStream(ctx, cmd)
}

func (s *swapClient) DoMultiStream(ctx context.Context, multi ...rueidis.Completed) rueidis.MultiRedisResultStream {
	return s.client().DoMultiStream(ctx, multi...)
}

func (s *swapClient) Dedicated(fn func(rueidis.DedicatedClient) error) error {
	return s.client().Dedicated(fn)
}

func (s *swapClient) Dedicate() (rueidis.DedicatedClient, func()) { return s.client().Dedicate() }

func (s *swapClient) Nodes() map[string]rueidis.Client { return s.client().Nodes() }

func (s *swapClient) Mode() rueidis.ClientMode { return s.client().Mode() }

func (s *swapClient) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.client().Close()
}

// Connected reports whether Redis has answered since New: always, but
// while a Limiter made with Config.DialInBackground is still dialing.
// Calls fail at once until it has.
func (l *Limiter) Connected() bool {
	sw, ok := l.client.(*swapClient)
	return !ok || sw.real.Load()
}

// dialInBackground dials with opt until Redis answers or the Limiter is
// closed, reporting each attempt to Config.OnDial, and swaps the client
// in. A Cluster's per-slot batchers are made before the swap, so that a
// request that sees the swap finds them.
func (l *Limiter) dialInBackground(opt rueidis.ClientOption, sw *swapClient) {
	wait := firstRedial
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-l.closed:
			return
		case <-timer.C:
		}
		c, err := newClient(l.cfg, opt)
		if err != nil {
			l.reportDial(fmt.Errorf("redisstore: connecting to %v: %w: %w", opt.InitAddress, floodgate.ErrStoreUnavailable, err))
			wait = min(2*wait, maxRedial)
			timer.Reset(wait)
			continue
		}
		if c.Mode() == rueidis.ClientModeCluster {
			l.slots = make([]atomic.Pointer[slotBatchers], 16384)
			l.cluster.Store(true)
		}
		if sw.swap(c) {
			l.reportDial(nil)
		}
		return
	}
}

func (l *Limiter) reportDial(err error) {
	if l.cfg.OnDial != nil {
		l.cfg.OnDial(err)
	}
}
