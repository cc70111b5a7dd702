package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrInvalidMembership is wrapped by every error NewMembership returns for a
// bad configuration.
var ErrInvalidMembership = errors.New("cluster: invalid membership config")

// MembershipConfig configures NewMembership.
type MembershipConfig struct {
	// Name is this node's name, unique in the cluster. Required.
	Name string
	// BindAddr is the host:port the node listens on (UDP and TCP). The host
	// must be an IP literal; port 0 picks a free port, which Addr reports.
	BindAddr string
	// Join lists host:port addresses of members already running. Empty: this
	// node starts a new cluster (others may join it later). A strategy that
	// carries state (gossip) should be attached before the join, so that the
	// join's state exchange reaches it: leave Join empty, create the
	// strategy, then call (*Membership).Join.
	Join []string
	// Logger receives memberlist's own log at debug level and the
	// membership's events at info. Nil: slog.Default().
	Logger *slog.Logger
	// Hook, if set, exchanges a strategy's state through the cluster's gossip
	// (the gossip strategy's state). It can also be attached later with
	// Attach.
	Hook MembershipHook
	// OnChange, if set, is called after each change of the live members
	// (join, leave, failure), from memberlist's goroutine, so that a strategy
	// can rebalance. It must not block; it may call Count and Names.
	OnChange func(MemberEvent)
	// Timing tunes the failure detector and gossip; zero fields take
	// memberlist's LAN defaults.
	Timing MembershipTiming
	// MaxQueued bounds the broadcasts waiting to be sent; beyond it the
	// oldest are dropped and push/pull repairs what they carried (a node
	// alone sends nothing, and its queue would otherwise grow). 0: 16384.
	MaxQueued int
}

// membershipDefaultMaxQueued is the queue bound of a config that sets none.
const membershipDefaultMaxQueued = 1 << 14

// MembershipTiming tunes how fast the cluster notices failures and spreads
// state. A failed node is declared dead after about
// ProbeInterval + SuspicionMult·log10(N+1)·ProbeInterval; a leave is seen as
// fast as gossip spreads it (a few GossipIntervals).
type MembershipTiming struct {
	ProbeInterval    time.Duration // how often a random member is probed
	ProbeTimeout     time.Duration // how long a probe waits for its ack
	GossipInterval   time.Duration // how often queued broadcasts are sent
	PushPullInterval time.Duration // how often full state is exchanged with one member (LAN default 30s: shorten it for limits of short Periods)
	SuspicionMult    int           // how many probe rounds a suspect has to refute
	LeaveTimeout     time.Duration // how long Close waits for its leave to be sent (default 1s)
}

// MemberEventKind says what happened to a member.
type MemberEventKind int

// The kinds of member events.
const (
	MemberJoined MemberEventKind = iota + 1
	MemberLeft                   // left gracefully or was declared dead
	MemberUpdated
)

// String names the kind.
func (k MemberEventKind) String() string {
	switch k {
	case MemberJoined:
		return "joined"
	case MemberLeft:
		return "left"
	case MemberUpdated:
		return "updated"
	}
	return "MemberEventKind(" + strconv.Itoa(int(k)) + ")"
}

// MemberEvent is one change of the live members.
type MemberEvent struct {
	Kind  MemberEventKind
	Node  string // the member that changed
	Count int    // live members after the change, this node included
}

// Membership is a Members backed by hashicorp/memberlist: the live nodes of
// a cluster found by gossip, with SWIM's failure detector. It also carries
// the gossip strategy's state (see MembershipHook) and implements
// GossipTransport.
type Membership struct {
	ml       *memberlist.Memberlist
	delegate *membershipDelegate
	leaveTO  time.Duration
	stopOnce sync.Once
	stopErr  error
}

var (
	_ Members         = (*Membership)(nil)
	_ MemberRanker    = (*Membership)(nil)
	_ GossipTransport = (*Membership)(nil)
)

// NewMembership starts a node: it binds cfg.BindAddr, and joins cfg.Join if
// given. ctx bounds the join. The node runs until Close or Shutdown.
func NewMembership(ctx context.Context, cfg MembershipConfig) (*Membership, error) {
	conf, err := membershipConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	d := newMembershipDelegate(cfg.Name, logger, cfg.OnChange)
	d.maxQueued = cfg.MaxQueued
	if d.maxQueued == 0 {
		d.maxQueued = membershipDefaultMaxQueued
	}
	if cfg.Hook != nil {
		d.attach(cfg.Hook)
	}
	conf.Delegate, conf.Events = d, d
	conf.Logger = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	ml, err := memberlist.Create(conf)
	if err != nil {
		return nil, fmt.Errorf("cluster: start membership %q on %s: %w", cfg.Name, cfg.BindAddr, err)
	}
	m := &Membership{ml: ml, delegate: d, leaveTO: cfg.Timing.LeaveTimeout}
	if m.leaveTO <= 0 {
		m.leaveTO = time.Second
	}
	if err := m.Join(ctx, cfg.Join); err != nil {
		_ = m.Shutdown() // the join's error says what went wrong
		return nil, err
	}
	return m, nil
}

// membershipConfigFor validates cfg and translates it to memberlist's.
func membershipConfigFor(cfg MembershipConfig) (*memberlist.Config, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("%w: node name is empty", ErrInvalidMembership)
	}
	host, portText, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: bind address %q is not host:port: %w", ErrInvalidMembership, cfg.BindAddr, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("%w: bind address %q: host must be an IP literal", ErrInvalidMembership, cfg.BindAddr)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: bind address %q: port must be 0-65535", ErrInvalidMembership, cfg.BindAddr)
	}
	if err := cfg.Timing.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxQueued < 0 {
		return nil, fmt.Errorf("%w: MaxQueued must not be negative, got %d", ErrInvalidMembership, cfg.MaxQueued)
	}
	conf := memberlist.DefaultLANConfig()
	conf.Name = cfg.Name
	conf.BindAddr, conf.BindPort = host, port
	conf.AdvertisePort = port
	cfg.Timing.apply(conf)
	return conf, nil
}

func (t MembershipTiming) validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"ProbeInterval", t.ProbeInterval}, {"ProbeTimeout", t.ProbeTimeout},
		{"GossipInterval", t.GossipInterval}, {"PushPullInterval", t.PushPullInterval},
		{"LeaveTimeout", t.LeaveTimeout},
	} {
		if f.d < 0 {
			return fmt.Errorf("%w: timing %s must not be negative, got %s", ErrInvalidMembership, f.name, f.d)
		}
	}
	if t.SuspicionMult < 0 {
		return fmt.Errorf("%w: timing SuspicionMult must not be negative, got %d", ErrInvalidMembership, t.SuspicionMult)
	}
	if t.ProbeTimeout > 0 && t.ProbeInterval > 0 && t.ProbeTimeout >= t.ProbeInterval {
		return fmt.Errorf("%w: timing ProbeTimeout %s must be shorter than ProbeInterval %s",
			ErrInvalidMembership, t.ProbeTimeout, t.ProbeInterval)
	}
	return nil
}

// apply copies the set fields over memberlist's defaults.
func (t MembershipTiming) apply(conf *memberlist.Config) {
	if t.ProbeInterval > 0 {
		conf.ProbeInterval = t.ProbeInterval
	}
	if t.ProbeTimeout > 0 {
		conf.ProbeTimeout = t.ProbeTimeout
	}
	if t.GossipInterval > 0 {
		conf.GossipInterval = t.GossipInterval
	}
	if t.PushPullInterval > 0 {
		conf.PushPullInterval = t.PushPullInterval
	}
	if t.SuspicionMult > 0 {
		conf.SuspicionMult = t.SuspicionMult
	}
}

// Join contacts members already running at the host:port addresses seeds
// and exchanges full state with them (so a hook attached before Join, such
// as a gossip strategy, starts with the cluster's counts). memberlist's join
// takes no context, so it runs aside and ctx bounds the wait; an abandoned
// join ends with the node's Shutdown.
func (m *Membership) Join(ctx context.Context, seeds []string) error {
	if len(seeds) == 0 {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.ml.Join(seeds)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("cluster: join %v: %w", seeds, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: join %v: %w", seeds, ctx.Err())
	}
}

// Self implements Members.
func (m *Membership) Self() string { return m.delegate.self }

// Count implements Members: the live members (alive or suspect), this node
// included.
func (m *Membership) Count() int { return m.delegate.numNodes() }

// Names returns the names of the live members, sorted.
func (m *Membership) Names() []string { return m.delegate.names() }

// Rank implements MemberRanker: this node's position among the sorted names
// of the live members.
func (m *Membership) Rank() int { return m.delegate.rank() }

// Addr is the host:port the node really listens on (with the port chosen
// when BindAddr asked for port 0): the address others join.
func (m *Membership) Addr() string {
	return m.ml.LocalNode().Address()
}

// Attach routes the gossip of state to h (replacing any earlier hook).
func (m *Membership) Attach(h MembershipHook) { m.delegate.attach(h) }

// Broadcast queues msg to be piggybacked on the cluster's gossip (sent to a
// few random members every GossipInterval, a few times over). A later
// message with the same name replaces one still queued. A message that does
// not fit in one UDP packet (about 1.4 kB with its framing) is never
// broadcast: only push/pull carries such state.
func (m *Membership) Broadcast(name string, msg []byte) { m.delegate.broadcast(name, msg) }

// Close leaves the cluster gracefully, so that the others drop this node
// at once instead of waiting for their failure detector, and stops it. No
// event is reported after it returns.
func (m *Membership) Close() error {
	m.stopOnce.Do(func() {
		leaveErr := m.ml.Leave(m.leaveTO)
		m.delegate.stop()
		m.stopErr = errors.Join(leaveErr, m.ml.Shutdown())
	})
	return m.stopErr
}

// Shutdown stops the node without telling the others, as a crash would:
// they notice through their failure detector. No event is reported after
// it returns.
func (m *Membership) Shutdown() error {
	m.stopOnce.Do(func() {
		m.delegate.stop()
		m.stopErr = m.ml.Shutdown()
	})
	return m.stopErr
}
