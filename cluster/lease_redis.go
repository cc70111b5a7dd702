package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
	"github.com/floodgate-io/floodgate/internal/rediserr"
)

//go:embed lua/lease_renew.lua
var leaseRenewSource string

// RedisCoordinatorConfig configures a RedisCoordinator.
type RedisCoordinatorConfig struct {
	// Client is the connection to Redis, standalone or Cluster; the
	// coordinator does not close it. (*redisstore.Limiter).Client shares
	// the store's.
	Client rueidis.Client
	// KeyPrefix is put before every key. A key's state is one hash named
	// KeyPrefix + "{" + key + "}", so that it has a hash slot of its own.
	KeyPrefix string
	// Timeout bounds one renewal, the round trip included (default 50ms).
	Timeout time.Duration
	// Clock, when set, supplies the coordinator's time instead of the
	// server's TIME: for tests that compare it with a
	// clustertest.Coordinator. Hashes then live ClockSlack (default 1
	// minute) longer than they need.
	Clock      floodgate.Clock
	ClockSlack time.Duration
}

// RedisCoordinator is a Coordinator in Redis: each renewal is one Lua
// script call on the key's hash, so renewals of one key from every node are
// serialised by Redis and the budget is shared without a server of its own.
// Windows follow the Redis server's clock (TIME), so the nodes' clocks do
// not matter. A hash expires once its window has ended and its nodes have
// stopped renewing.
type RedisCoordinator struct {
	client  rueidis.Client
	prefix  string
	timeout time.Duration
	clock   floodgate.Clock
	slackMS string
	script  *rueidis.Lua
}

// NewRedisCoordinator returns a coordinator on cfg.Client.
func NewRedisCoordinator(cfg RedisCoordinatorConfig) (*RedisCoordinator, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("cluster: RedisCoordinatorConfig.Client is nil")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("cluster: RedisCoordinatorConfig.Timeout must not be negative, got %s", cfg.Timeout)
	case cfg.ClockSlack < 0:
		return nil, fmt.Errorf("cluster: RedisCoordinatorConfig.ClockSlack must not be negative, got %s", cfg.ClockSlack)
	}
	c := &RedisCoordinator{
		client:  cfg.Client,
		prefix:  cfg.KeyPrefix,
		timeout: leaseOr(cfg.Timeout, 50*time.Millisecond),
		clock:   cfg.Clock,
		slackMS: "0",
		script:  rueidis.NewLuaScript(leaseRenewSource),
	}
	if cfg.Clock != nil {
		c.slackMS = strconv.FormatInt(leaseOr(cfg.ClockSlack, time.Minute).Milliseconds(), 10)
	}
	return c, nil
}

// leaseOr returns d, or def when d is zero.
func leaseOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Renew implements Coordinator.
func (c *RedisCoordinator) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	if err := shared.CheckLease(shared.LeaseRequest(req)); err != nil {
		return LeaseGrant{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	reply, err := c.script.Exec(callCtx, c.client, []string{c.key(req.Key)}, c.args(req)).AsIntSlice()
	if err != nil {
		return LeaseGrant{}, c.storeError(ctx, req.Key, err)
	}
	if len(reply) != 7 {
		return LeaseGrant{}, fmt.Errorf("cluster: lease script replied %d values, want 7", len(reply))
	}
	return LeaseGrant{
		Window:     reply[0],
		Granted:    reply[1],
		Used:       reply[2],
		Valid:      time.Duration(reply[3]) * time.Microsecond,
		WindowLeft: time.Duration(reply[4]) * time.Microsecond,
		Unleased:   reply[5],
		Stale:      reply[6] == 1,
	}, nil
}

// key names the hash of a limited key; the braces make the key its hash tag.
func (c *RedisCoordinator) key(key string) string { return c.prefix + "{" + key + "}" }

// args is the script's ARGV, in the order lease_renew.lua reads it.
func (c *RedisCoordinator) args(r LeaseRequest) []string {
	now := int64(-1)
	if c.clock != nil {
		now = c.clock.Now().UnixMicro()
	}
	leaving := "0"
	if r.Leaving {
		leaving = "1"
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{
		i(now), c.slackMS, r.Node, i(r.Rate),
		i(int64(r.Period / time.Microsecond)), i(int64(r.Lease / time.Microsecond)),
		i(r.Window), i(r.Used), i(r.Pinned), i(r.Demand), leaving, i(int64(r.Nodes)), i(r.Seq), i(r.Answered),
	}
}

// storeError classifies a failed call: the caller giving up is the caller's
// error, Redis answering with an error is a defect reported as is, and no
// answer in time is the store being unavailable.
func (c *RedisCoordinator) storeError(ctx context.Context, key string, err error) error {
	return rediserr.Classify(ctx, fmt.Sprintf("cluster: renewing lease on %q", key), err)
}
