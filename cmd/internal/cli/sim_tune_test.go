package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/sim/bounds"
)

// runSimTune runs `sim tune args` with confirm and returns its output.
func runSimTune(t *testing.T, confirm bounds.Confirm, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newSimTuneCmdWith(func(simTuneFlags) bounds.Confirm { return confirm })
	if confirm == nil {
		cmd = newSimTuneCmd()
	}
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// measured is a confirmation that always saw the same thing.
func measured(overshoot float64) bounds.Confirm {
	return func(context.Context, string, bounds.Params) (bounds.Measurement, error) {
		return bounds.Measurement{Overshoot: overshoot, StoreCallsPerSecond: 12}, nil
	}
}

// TestSimTuneRefusesBadFlags: every mistake is named, nothing runs.
func TestSimTuneRefusesBadFlags(t *testing.T) {
	ok := []string{"--limit", "1000/s", "--nodes", "10", "--tolerance", "5%"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no limit", []string{"--nodes", "10", "--tolerance", "5%"}, `"limit" not set`},
		{"limit without unit", append(ok, "--limit", "1000"), "want N/unit"},
		{"tolerance in words", append(ok, "--tolerance", "five"), "--tolerance"},
		{"negative tolerance", append(ok, "--tolerance", "-1%"), "--tolerance"},
		{"no nodes", append(ok, "--nodes", "0"), "--nodes must be at least 1"},
		{"zero load", append(ok, "--arrival", "0x"), "--arrival"},
		{"two arrival flags", append(ok, "--arrival", "2x", "--rate-per-node", "50"), "use one"},
		{"negative rate per node", append(ok, "--rate-per-node", "-5"), "--rate-per-node"},
		{"unknown strategy", append(ok, "--strategies", "raft"), `unknown strategy "raft"`},
		{"poisson of 1", append(ok, "--poisson", "1"), "Poisson must be a probability"},
		{"no windows", append(ok, "--windows", "0"), "--windows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runSimTune(t, measured(0), tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
			if out != "" {
				t.Errorf("printed a report for bad input:\n%s", out)
			}
		})
	}
}

// TestSimTuneTable: the analytic answer for the doc's steady arrivals
// (--poisson 0), worked by hand in package bounds: synced's T solves
// 9·200·(2T + 0.005) = 50.
func TestSimTuneTable(t *testing.T) {
	out, err := runSimTune(t, measured(7), "--limit", "1000/s", "--nodes", "10", "--tolerance", "5%", "--poisson", "0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"tolerance 5% of the limit = 50 units",
		"synced    11.388ms",
		"leased    any (1s)",
		"100 units/1.5s",
		"synced: bounded:",
		"sampled: bounded: sampled has no T",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "yes"); n != 6 {
		t.Errorf("%d rows confirmed, want 6:\n%s", n, out)
	}
}

// TestSimTuneJSON: --json carries the same answer, machine-readable.
func TestSimTuneJSON(t *testing.T) {
	out, err := runSimTune(t, measured(7), "--limit", "600/m", "--nodes", "4", "--tolerance", "0.1",
		"--rate-per-node", "5", "--keys", "3", "--strategies", "synced,exact", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Tolerance  float64
		Keys       int
		Strategies []bounds.TuneRow
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if report.Tolerance != 0.1 || report.Keys != 3 || len(report.Strategies) != 2 {
		t.Fatalf("report = %+v", report)
	}
	synced, exact := report.Strategies[0], report.Strategies[1]
	if synced.Verdict != bounds.Bounded || synced.Interval <= 0 || synced.Measured == nil || synced.Measured.Overshoot != 7 {
		t.Errorf("synced row = %+v", synced)
	}
	// exact: 3 keys · 4 nodes · 5/s, a call per decision.
	if exact.StoreCallsPerSecond != 60 || exact.Verdict != bounds.AnyInterval {
		t.Errorf("exact row = %+v, want 60 calls/s, any T", exact)
	}
}

// TestSimTuneFailsWhenRefuted: a measurement above the tolerance, or a
// failed one, makes the command fail after printing the table.
func TestSimTuneFailsWhenRefuted(t *testing.T) {
	out, err := runSimTune(t, measured(51), "--limit", "1000/s", "--nodes", "10", "--tolerance", "5%", "--strategies", "synced")
	if err == nil || !strings.Contains(err.Error(), "synced measured 51 units") || !strings.Contains(out, "NO") {
		t.Errorf("err = %v, output:\n%s", err, out)
	}
	broken := func(context.Context, string, bounds.Params) (bounds.Measurement, error) {
		return bounds.Measurement{}, errors.New("simulator exploded")
	}
	out, err = runSimTune(t, broken, "--limit", "1000/s", "--nodes", "10", "--tolerance", "5%", "--strategies", "gossip")
	if !errors.Is(err, bounds.ErrConfirmFailed) || !strings.Contains(out, "error: simulator exploded") {
		t.Errorf("err = %v, output:\n%s", err, out)
	}
}

// TestSimTuneConfirmedBySimulation: over a sweep of fleets and tolerances,
// each tuned setting, simulated (Poisson arrivals, as the bounds assume by
// default), stays within its tolerance and within its own bound.
func TestSimTuneConfirmedBySimulation(t *testing.T) {
	sweep := []struct {
		nodes     int
		tolerance string
		extra     []string
	}{
		{2, "2%", nil},
		{10, "5%", nil},
		{25, "10%", []string{"--arrival", "4x", "--delay", "2ms"}},
		{10, "30%", nil},
	}
	for _, s := range sweep {
		t.Run(fmt.Sprintf("N=%d tolerance %s", s.nodes, s.tolerance), func(t *testing.T) {
			t.Parallel() // independent runs; each is deterministic
			args := append([]string{"--limit", "1000/s", "--nodes", fmt.Sprint(s.nodes), "--tolerance", s.tolerance,
				"--windows", "5", "--json"}, s.extra...)
			out, err := runSimTune(t, nil, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var report struct{ Strategies []bounds.TuneRow }
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatal(err)
			}
			for _, row := range report.Strategies {
				if row.Verdict == bounds.NoInterval {
					continue
				}
				if row.Measured == nil || row.Measured.Overshoot > row.Overshoot || !row.Confirmed() {
					t.Errorf("%s: measured %+v, bound %v, tolerance %v", row.Strategy, row.Measured, row.Overshoot, row.Tolerance)
				}
			}
		})
	}
}
