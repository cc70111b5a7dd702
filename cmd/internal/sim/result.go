package sim

// Result is one simulation's measurements. Durations are in microseconds.
type Result struct {
	// Config is the run's configuration, defaults filled in.
	Config Config `json:"-"`

	Strategy  string  `json:"strategy"`
	Workload  string  `json:"workload"`
	Nodes     int     `json:"nodes"`
	Interval  int64   `json:"interval_us"`
	Algorithm string  `json:"algorithm"`
	Rate      int64   `json:"rate"`
	Period    int64   `json:"period_us"`
	Load      float64 `json:"load"`
	Delay     int64   `json:"delay_us"`
	Jitter    int64   `json:"jitter_us"`
	Loss      float64 `json:"loss"`
	Skew      int64   `json:"skew_us"`
	Seed      uint64  `json:"seed"`
	OneIn     int64   `json:"one_in"`

	// Offered, Admitted and Denied total the measured windows; Errors
	// counts the denials that were errors (store unavailable).
	Offered  int64 `json:"offered"`
	Admitted int64 `json:"admitted"`
	Denied   int64 `json:"denied"`
	Errors   int64 `json:"errors"`
	// OvershootMax and OvershootP99 are the largest and the 99th percentile
	// of the windows' overshoot; OvershootShare the share of windows over
	// the limit.
	OvershootMax   int64   `json:"overshoot_max"`
	OvershootP99   int64   `json:"overshoot_p99"`
	OvershootShare float64 `json:"overshoot_share"`
	// Undershoot totals the windows' undershoot: requests denied while the
	// window still had room.
	Undershoot int64 `json:"undershoot"`
	// Shortfall totals the windows' shortfall: units of min(offered, Rate)
	// not admitted by the window's end.
	Shortfall int64 `json:"shortfall"`
	// Utilisation is Σ admitted / Σ min(offered, Rate) over the windows.
	Utilisation float64 `json:"utilisation"`
	// StoreCalls counts the calls to the shared store, GossipMessages the
	// messages between gossip nodes; SharedPerDecision and SharedPerSecond
	// relate their sum to the decisions and to the simulated time.
	StoreCalls        int64   `json:"store_calls"`
	GossipMessages    int64   `json:"gossip_messages"`
	SharedPerDecision float64 `json:"shared_per_decision"`
	SharedPerSecond   float64 `json:"shared_per_second"`
	// FairnessNodes and FairnessClients are Jain's index of admitted/offered
	// across the nodes and across the clients.
	FairnessNodes   float64 `json:"fairness_nodes"`
	FairnessClients float64 `json:"fairness_clients"`

	// PerNode is each node's share, in index order.
	PerNode []NodeResult `json:"per_node"`
	// Windows is the per-window series, in time order.
	Windows []Window `json:"windows"`
}

// NodeResult is what one node was offered and admitted.
type NodeResult struct {
	Name     string `json:"name"`
	Offered  int64  `json:"offered"`
	Admitted int64  `json:"admitted"`
}

// summarise fills the summary numbers from the oracle and the nodes.
func (s *simulation) summarise() Result {
	c := s.cfg
	r := Result{Config: c, Strategy: c.Strategy, Workload: c.Workload, Nodes: c.Nodes,
		Interval: c.Interval.Microseconds(), Algorithm: string(c.Limit.Algorithm), Rate: c.Limit.Rate,
		Period: c.Limit.Period.Microseconds(), Load: c.Load, Delay: c.Delay.Microseconds(),
		Jitter: c.Jitter.Microseconds(), Loss: c.Loss, Skew: c.Skew.Microseconds(), Seed: c.Seed, OneIn: c.OneIn,
		Errors: s.oracle.errors, StoreCalls: s.storeCalls, GossipMessages: s.gossipMessages}
	overs := make([]int64, len(s.oracle.windows))
	var usable int64
	for i := range s.oracle.windows {
		w := &s.oracle.windows[i]
		w.Overshoot = max(0, w.Admitted-c.Limit.Rate)
		w.Shortfall = max(0, min(w.Offered, c.Limit.Rate)-w.Admitted)
		overs[i] = w.Overshoot
		r.Shortfall += w.Shortfall
		r.Offered += w.Offered
		r.Admitted += w.Admitted
		r.Denied += w.Denied
		r.Undershoot += w.Undershoot
		usable += min(w.Offered, c.Limit.Rate)
		if w.Overshoot > 0 {
			r.OvershootShare++
		}
	}
	r.Windows = s.oracle.windows
	r.OvershootMax = percentile(overs, 1)
	r.OvershootP99 = percentile(overs, 0.99)
	r.OvershootShare /= float64(len(overs))
	r.Utilisation = ratio(r.Admitted, usable)
	shared := s.storeCalls + s.gossipMessages
	r.SharedPerDecision = ratio(shared, r.Admitted+r.Denied)
	r.SharedPerSecond = float64(shared) / c.Duration.Seconds()
	admitted, offered := make([]int64, len(s.nodes)), make([]int64, len(s.nodes))
	for i, n := range s.nodes {
		r.PerNode = append(r.PerNode, NodeResult{Name: n.name, Offered: n.offered, Admitted: n.admitted})
		admitted[i], offered[i] = n.admitted, n.offered
	}
	r.FairnessNodes = jain(admitted, offered)
	r.FairnessClients = jain(s.oracle.clientAdmitted, s.oracle.clientOffered)
	return r
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
