package failover

import (
	"context"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/breaker"
)

// succeeded records an answer from the store. When it closes the breaker the
// local state is dropped: the store has been authoritative again since, so
// the next outage must not start from counts of the last one.
func (l *core) succeeded(p *breaker.Phase) {
	if !l.breaker.Succeeded(p) {
		return
	}
	if l.local != nil {
		l.local.Close()
	}
	l.logger().Info("failover: store is back, circuit breaker closed", "mode", l.cfg.Mode)
}

// failed records a store failure. An outage is logged once, when it starts;
// the failed probes that follow are debug noise.
func (l *core) failed(p *breaker.Phase, cause error) {
	if !l.breaker.Failed(p) {
		return
	}
	l.stats.breakerOpens.Add(1)
	log := l.logger()
	if p.State() == Closed {
		log.Warn("failover: store unavailable, circuit breaker open", "mode", l.cfg.Mode,
			"failures", l.cfg.FailureThreshold, "cool_down", l.cfg.CoolDown, "cause", cause)
		return
	}
	log.Debug("failover: probe failed, circuit breaker open again", "cool_down", l.cfg.CoolDown, "cause", cause)
}

// degrade is the policy's decision on one request.
func (l *core) degrade(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	switch l.cfg.Mode {
	case FailOpen:
		d, err := l.local.AllowN(ctx, key, limit, cost)
		return opened(d), err
	case FailClosed:
		if err := validate(key, limit, cost); err != nil {
			return floodgate.Decision{}, err
		}
		return l.closed(limit), nil
	default:
		return l.local.AllowN(ctx, key, nodeShare(limit, l.nodes()), cost)
	}
}

// degradeAll is the policy's decision on a whole batch.
func (l *core) degradeAll(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	switch l.cfg.Mode {
	case FailOpen:
		ds, err := l.local.AllowAll(ctx, reqs)
		for i := range ds {
			ds[i] = opened(ds[i])
		}
		return ds, err
	case FailClosed:
		ds := make([]floodgate.Decision, len(reqs))
		for i, rq := range reqs {
			if err := validate(rq.Key, rq.Limit, rq.Cost); err != nil {
				return nil, err
			}
			ds[i] = l.closed(rq.Limit)
		}
		return ds, nil
	default:
		shares := make([]floodgate.Request, len(reqs))
		for i, rq := range reqs {
			shares[i] = floodgate.Request{Key: rq.Key, Limit: nodeShare(rq.Limit, l.nodes()), Cost: rq.Cost}
		}
		return l.local.AllowAll(ctx, shares)
	}
}

// opened turns the local count into FailOpen's answer: allowed at once,
// whatever the count says, with its Limit, Remaining and ResetAfter.
func opened(d floodgate.Decision) floodgate.Decision {
	d.Allowed, d.RetryAfter, d.Delay = true, 0, 0
	return d
}

// closed is FailClosed's answer.
func (l *core) closed(limit floodgate.Limit) floodgate.Decision {
	return floodgate.Decision{Limit: capacity(limit), RetryAfter: l.breaker.RetryAfter()}
}

// nodeShare is one node's share of a limit enforced by n nodes: rate and
// burst divided by n, rounded up, so that no share is zero and the shares
// together admit at least the limit. A burst of 0 stays 0: it already means
// the (divided) rate. Invalid values are left for the Memory to reject.
func nodeShare(l floodgate.Limit, n int) floodgate.Limit {
	if n <= 1 {
		return l
	}
	l.Rate = ceilDiv(l.Rate, int64(n))
	l.Burst = ceilDiv(l.Burst, int64(n))
	return l
}

func ceilDiv(x, n int64) int64 {
	if x <= 0 {
		return x
	}
	q := x / n
	if x%n != 0 {
		q++
	}
	return q
}

// capacity is what Decision.Limit reports for limit: Burst for buckets, Rate
// for windows.
func capacity(l floodgate.Limit) int64 {
	if (l.Algorithm == floodgate.TokenBucket || l.Algorithm == floodgate.LeakyBucket) && l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// validate rejects bad input as a store would, so that FailClosed does not
// turn a caller's bug into a denial that looks like an outage.
func validate(key string, limit floodgate.Limit, cost int64) error {
	if err := floodgate.ValidateRequest(key, cost); err != nil { // the key-size policy included
		return err
	}
	return limit.Validate()
}
