package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/floodgate-io/floodgate"
)

// simulation is one run's state. Only one goroutine touches it at a time:
// the engine's, or the process it handed control to.
type simulation struct {
	cfg    Config
	ctx    context.Context
	eng    engine
	start  int64 // µs, a multiple of the period
	end    int64
	period int64
	key    string

	arrivals *rand.Rand // arrival times, routing, clients
	net      *rand.Rand // delays, jitter, loss, push/pull peers
	seeds    *rand.Rand // the sampled nodes' own generators
	nextAt   float64    // the next candidate arrival, µs

	work   workload
	nodes  []*node
	live   []*node // in index order
	oracle *oracle

	storeCalls, gossipMessages int64
}

// epoch is where virtual time starts (2026-01-01T00:00:00Z), moved back to
// a multiple of the limit's period so that windows align with the run.
const epoch = 1_767_225_600_000_000

// Run simulates cfg and measures it. The same cfg gives the same Result.
// It returns an error wrapping ErrInvalidConfig for a configuration it
// cannot simulate, and ctx's error when ctx ends first.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	s, err := newSimulation(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	s.eng.run()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return s.summarise(), nil
}

// newSimulation builds the fleet and schedules the first events.
func newSimulation(ctx context.Context, cfg Config) (*simulation, error) {
	period := cfg.Limit.Period.Microseconds()
	s := &simulation{cfg: cfg, ctx: ctx, period: period, key: "global"}
	s.start = epoch - epoch%period
	s.end = s.start + cfg.Duration.Microseconds()
	s.eng.now = s.start
	master := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	s.arrivals = rand.New(rand.NewPCG(master.Uint64(), master.Uint64()))
	s.net = rand.New(rand.NewPCG(master.Uint64(), master.Uint64()))
	s.seeds = rand.New(rand.NewPCG(master.Uint64(), master.Uint64()))
	s.work = newWorkload(cfg, s.arrivals)
	s.oracle = newOracle(s.start, period, cfg.Limit.Rate, int(cfg.Duration.Microseconds()/period), cfg.Clients)
	sh, err := s.newShared()
	if err != nil {
		return nil, err
	}
	total := cfg.Nodes
	if cfg.Workload == "churn" {
		total++ // the node that joins
	}
	for i := range total {
		n, err := s.newNode(i, sh)
		if err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, n)
	}
	for i, n := range s.nodes[:cfg.Nodes] {
		n.alive = true
		s.live = append(s.live, n)
		s.startRounds(n, s.start+cfg.Interval.Microseconds()*int64(i+1)/int64(cfg.Nodes))
	}
	if cfg.Workload == "churn" {
		s.scheduleChurn()
	}
	s.scheduleArrival()
	return s, nil
}

// scheduleChurn kills the first node at DieAt and brings the extra one in
// at JoinAt.
func (s *simulation) scheduleChurn() {
	dying, joining := s.nodes[0], s.nodes[len(s.nodes)-1]
	s.eng.at(s.start+s.cfg.Params.DieAt.Microseconds(), func() {
		dying.alive = false
		s.live = slices.DeleteFunc(s.live, func(n *node) bool { return n == dying })
	})
	s.eng.at(s.start+s.cfg.Params.JoinAt.Microseconds(), func() {
		joining.alive = true
		s.live = append(s.live, joining)
		s.startRounds(joining, s.eng.now)
	})
}

// startRounds runs n's round every T from first, skipping a round while the
// previous one still waits for the store (a round holds the strategy's own
// locks), until n dies or the run ends.
func (s *simulation) startRounds(n *node, first int64) {
	if n.round == nil {
		return
	}
	busy := false
	var tick func()
	tick = func() {
		if !n.alive || s.eng.now >= s.end || s.ctx.Err() != nil {
			return
		}
		if !busy {
			busy = true
			s.spawn(func(ctx context.Context, _ *process) { n.round(ctx); busy = false })
		}
		s.eng.after(s.cfg.Interval.Microseconds(), tick)
	}
	s.eng.at(first, tick)
}

// scheduleArrival draws the next arrival of the fleet's Poisson stream (at
// the workload's peak rate, thinned to its rate at the time).
func (s *simulation) scheduleArrival() {
	perMicro := s.cfg.Load * float64(s.cfg.Limit.Rate) / float64(s.period) * s.work.peak
	s.nextAt += s.arrivals.ExpFloat64() / perMicro
	t := s.start + int64(math.Floor(s.nextAt))
	if t >= s.end {
		return
	}
	s.eng.at(t, func() {
		if s.ctx.Err() != nil {
			return
		}
		if s.work.peak == 1 || s.arrivals.Float64()*s.work.peak < s.work.factor(t-s.start) {
			s.arrive()
		}
		s.scheduleArrival()
	})
}

// arrive routes one request and decides it on its node.
func (s *simulation) arrive() {
	n, client := s.work.route(s.eng.now-s.start, s.arrivals, s.live)
	arrived := s.eng.now
	s.oracle.offer(arrived, n, client)
	decide := func(ctx context.Context, p *process) {
		d, err := n.lim.AllowN(ctx, s.key, s.cfg.Limit, 1)
		at := s.eng.now
		switch {
		case p != nil && p.hasDecide:
			at = p.decidedAt
		case n.decidesOnArrival:
			at = arrived
		}
		s.oracle.decide(at, n, client, err == nil && d.Allowed, err != nil)
	}
	if n.blocking {
		s.spawn(decide)
		return
	}
	decide(s.ctx, nil)
}

var _ floodgate.Clock = (*virtualClock)(nil)
