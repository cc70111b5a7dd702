package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate/cmd/internal/experiments"
)

// runExperimentCmd runs a command built by newCmd with args, in process.
func runExperimentCmd(t *testing.T, newCmd func() *cobra.Command, args ...string) (string, error) {
	t.Helper()
	cmd := newCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

var smallAccuracy = []string{"--requests", "20000", "--sources", "200", "--seed", "7", "--rate", "10", "--sweep=false"}

func TestSimAccuracyOutputs(t *testing.T) {
	tests := []struct {
		name  string
		extra []string
		want  []string // substrings the output must hold
	}{
		{"text table", nil, []string{"limit 10 per 1m0s per source, seed 7", "tail α", "wrongly allowed %", "1.5"}},
		{"json", []string{"--json"}, []string{`"replay"`, `"shadow"`, `"requests": 20000`}},
		{"csv", []string{"--csv"}, []string{"tail_index,duty_cycle,load,requests", "1.5,0.2,0.01,20000,200,10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runExperimentCmd(t, newSimAccuracyCmd, append(smallAccuracy, tt.extra...)...)
			if err != nil {
				t.Fatalf("error: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestSimAccuracyIsReproducible(t *testing.T) {
	first, err := runExperimentCmd(t, newSimAccuracyCmd, append(smallAccuracy, "--csv")...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := runExperimentCmd(t, newSimAccuracyCmd, append(smallAccuracy, "--csv", "--workers", "3")...)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("same seed, different output:\n%s\n---\n%s", first, second)
	}
}

func TestSimExperimentsRejectBadFlags(t *testing.T) {
	tests := []struct {
		name   string
		newCmd func() *cobra.Command
		args   []string
		want   string
	}{
		{"accuracy: fewer requests than sources", newSimAccuracyCmd, []string{"--requests", "10", "--sources", "100"}, "requests (10) must be at least"},
		{"accuracy: duty cycle above 1", newSimAccuracyCmd, append(smallAccuracy, "--duty-cycle", "2"), "duty cycle must be in (0, 1]"},
		{"accuracy: json and csv", newSimAccuracyCmd, append(smallAccuracy, "--json", "--csv"), "none of the others can be"},
		{"boundary: share not whole", newSimBoundaryCmd, []string{"--rate", "15", "--nodes", "10"}, "multiple of the node count"},
		{"boundary: skew beyond period", newSimBoundaryCmd, []string{"--skews", "2s"}, "outside [0, 1s]"},
		{"boundary: bursts wider than half a period", newSimBoundaryCmd, []string{"--width", "600ms"}, "do not fit in one period"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runExperimentCmd(t, tt.newCmd, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestSimBoundaryShowsTheDoubleBurst(t *testing.T) {
	out, err := runExperimentCmd(t, newSimBoundaryCmd, "--periods", "50", "--skews", "0s,500ms", "--json")
	if err != nil {
		t.Fatalf("error: %v\n%s", err, out)
	}
	var got struct {
		Boundary struct {
			Rows []struct {
				Algorithm   string `json:"algorithm"`
				MaxInPeriod int64  `json:"max_in_period"`
			} `json:"rows"`
		} `json:"boundary"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	maxBy := map[string]int64{}
	for _, r := range got.Boundary.Rows {
		maxBy[r.Algorithm] = r.MaxInPeriod
	}
	if maxBy["fixed_window"] != 200 || maxBy["sliding_log"] != 100 {
		t.Errorf("max in any period = %v, want fixed_window 200 (2× the limit of 100) and sliding_log 100", maxBy)
	}
}

// A floodgate built without the plots tag refuses --plot and sim plots at
// once, saying how to build the one that draws.
func TestPlotsNeedThePlotsTag(t *testing.T) {
	if experiments.Drawable() == nil {
		t.Skip("built with -tags plots")
	}
	dir := t.TempDir()
	for _, run := range []func() error{
		func() error { _, err := runExperimentCmd(t, newSimBoundaryCmd, "--plot", dir); return err },
		func() error { _, err := runExperimentCmd(t, newSimAccuracyCmd, "--plot", dir); return err },
		func() error { _, err := runExperimentCmd(t, newSimPlotsCmd, "--out", dir); return err },
	} {
		if err := run(); !errors.Is(err, experiments.ErrNoPlots) {
			t.Errorf("got %v, want experiments.ErrNoPlots", err)
		}
	}
}
