package sim_test

import (
	"testing"
	"time"
)

// TestWorkloads checks, for each workload, the one thing it exists to
// show, on the strategy that shows it best.
func TestWorkloads(t *testing.T) {
	uniform := run(t, small("local", "uniform"))
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"uniform: exact admits min(offered, R) in every window", func(t *testing.T) {
			r := run(t, small("exact", "uniform"))
			if r.OvershootMax != 0 || r.Shortfall != 0 {
				t.Errorf("overshoot %d, shortfall %d; want 0 and 0", r.OvershootMax, r.Shortfall)
			}
		}},
		{"zipf: skew across nodes costs local quota and node fairness", func(t *testing.T) {
			r := run(t, small("local", "zipf"))
			if r.Shortfall <= uniform.Shortfall || r.FairnessNodes >= uniform.FairnessNodes {
				t.Errorf("zipf shortfall %d, node fairness %.3f; uniform %d, %.3f: want more and less",
					r.Shortfall, r.FairnessNodes, uniform.Shortfall, uniform.FairnessNodes)
			}
		}},
		{"sticky: heavy clients pinned to nodes get less of what they ask under local", func(t *testing.T) {
			r := run(t, small("local", "sticky"))
			if r.FairnessClients >= uniform.FairnessClients {
				t.Errorf("client fairness %.3f, not below uniform's %.3f", r.FairnessClients, uniform.FairnessClients)
			}
		}},
		{"shift: traffic leaves the first half of the nodes at ShiftAt", func(t *testing.T) {
			r := run(t, small("leased", "shift"))
			half := len(r.PerNode) / 2
			before, after := r.PerNode[0].Offered, r.PerNode[half].Offered
			if before == 0 || after == 0 {
				t.Errorf("node 0 offered %d, node %d offered %d: want both groups to get traffic", before, half, after)
			}
			last := r.Windows[len(r.Windows)-1]
			if last.Admitted != 100 {
				t.Errorf("leased admitted %d in the last window after the shift, want the whole 100", last.Admitted)
			}
		}},
		{"bursts: some windows are offered far more than others", func(t *testing.T) {
			r := run(t, small("exact", "bursts"))
			lo, hi := r.Windows[0].Offered, r.Windows[0].Offered
			for _, w := range r.Windows {
				lo, hi = min(lo, w.Offered), max(hi, w.Offered)
			}
			if hi < 2*lo {
				t.Errorf("offered per window in [%d, %d]: no burst", lo, hi)
			}
		}},
		{"skew: local fixed windows on shifted clocks overshoot", func(t *testing.T) {
			c := small("local", "skew")
			c.Skew = 40 * time.Millisecond
			if r := run(t, c); r.OvershootMax == 0 || uniform.OvershootMax != 0 {
				t.Errorf("overshoot %d with skew, %d without: want some, then none", r.OvershootMax, uniform.OvershootMax)
			}
		}},
		{"churn: the dead node stops, the new one starts, exact keeps the limit", func(t *testing.T) {
			r := run(t, small("exact", "churn"))
			dead, joined := r.PerNode[0], r.PerNode[len(r.PerNode)-1]
			if len(r.PerNode) != 5 || dead.Offered >= r.PerNode[1].Offered || joined.Offered >= r.PerNode[1].Offered || joined.Offered == 0 {
				t.Errorf("per node %+v: want node 0 and the joiner offered less than the others, the joiner some", r.PerNode)
			}
			if r.OvershootMax != 0 {
				t.Errorf("exact overshoot %d under churn", r.OvershootMax)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestLossAnswersStoreUnavailable: a call whose request or reply is lost
// fails at the timeout, so with loss q each way an exact decision fails
// with probability 1 − (1−q)².
func TestLossAnswersStoreUnavailable(t *testing.T) {
	c := small("exact", "uniform")
	c.Loss = 0.2
	r := run(t, c)
	share := float64(r.Errors) / float64(r.Admitted+r.Denied)
	if want := 1 - 0.8*0.8; share < want-0.05 || share > want+0.05 {
		t.Errorf("%.3f of decisions failed, want about %.2f", share, want)
	}
}

// TestSharedTrafficFallsWithT: the synced strategy's store calls per
// decision fall as 1/T, and local makes none.
func TestSharedTrafficFallsWithT(t *testing.T) {
	fast, slow := small("synced", "uniform"), small("synced", "uniform")
	fast.Interval, slow.Interval = 10*time.Millisecond, 40*time.Millisecond
	rf, rs := run(t, fast), run(t, slow)
	if got := rf.SharedPerSecond / rs.SharedPerSecond; got < 3.5 || got > 4.5 {
		t.Errorf("calls per second at T=10ms / at T=40ms = %.2f, want about 4", got)
	}
	if r := run(t, small("local", "uniform")); r.SharedPerDecision != 0 {
		t.Errorf("local made %.3f shared calls per decision", r.SharedPerDecision)
	}
}
