package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

// simSmall is a sweep that runs in a blink: 2 strategies × 2 intervals of
// 4 nodes sharing 100/s for 3 seconds.
var simSmall = []string{"sim", "--strategy", "synced,leased", "--nodes", "4", "--interval", "20ms,100ms",
	"--limit", "100/s", "--duration", "3s", "--delay", "2ms", "--jitter", "500us"}

// simRun runs floodgate with args through the root command, as a user
// would, and returns what it printed.
func simRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestSimPrintsOneRowPerRun: the sweep runs every combination, in every
// output format.
func TestSimPrintsOneRowPerRun(t *testing.T) {
	table, err := simRun(t, simSmall...)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 5 || !strings.Contains(lines[0], "over_max") {
		t.Fatalf("table has %d lines, want a header and 4 runs:\n%s", len(lines), table)
	}

	out, err := simRun(t, append(simSmall, "--csv")...)
	if err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(records) != 5 || records[1][0] != "synced" || records[4][0] != "leased" {
		t.Fatalf("csv: %v, records %v", err, records)
	}

	out, err = simRun(t, append(simSmall, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var results []struct {
		Strategy string `json:"strategy"`
		Interval int64  `json:"interval_us"`
		Windows  []any  `json:"windows"`
	}
	if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != 4 || results[1].Interval != 100_000 || len(results[0].Windows) != 3 {
		t.Fatalf("json: %v, %+v", err, results)
	}

	out, err = simRun(t, append(simSmall, "--series")...)
	if err != nil {
		t.Fatal(err)
	}
	if records, err := csv.NewReader(strings.NewReader(out)).ReadAll(); err != nil || len(records) != 1+4*3 {
		t.Fatalf("series: %v, %d records, want a header and 4 runs × 3 windows", err, len(records))
	}
}

// TestSimIsReproducible: the same flags print the same bytes; another
// seed prints others.
func TestSimIsReproducible(t *testing.T) {
	args := append(simSmall, "--loss", "0.05", "--json")
	first, err := simRun(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if second, _ := simRun(t, args...); second != first {
		t.Fatal("two runs with the same flags printed different bytes")
	}
	if other, _ := simRun(t, append(args, "--seed", "2")...); other == first {
		t.Fatal("seeds 1 and 2 printed the same bytes")
	}
}

// TestSimRejectsBadFlags: every mistake is an error that names it.
func TestSimRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown strategy", []string{"--strategy", "magic"}, `unknown strategy "magic"`},
		{"bad limit", []string{"--limit", "lots"}, `--limit "lots"`},
		{"loss of everything", []string{"--loss", "1"}, "loss must be in [0, 1)"},
		{"two formats", []string{"--json", "--csv"}, "none of the others can be"},
		{"empty list", []string{"--nodes", ""}, "nodes"},
		{"leased on a token bucket", []string{"--strategy", "leased", "--algorithm", "token_bucket"}, "serves [fixed_window]"},
		{"a sweep too large", []string{"--nodes", strings.Repeat("2,", 200) + "2", "--interval", strings.Repeat("1s,", 99) + "1s"}, "more than 10000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"sim", "--duration", "1s", "--limit", "10/s"}, tt.args...)
			_, err := simRun(t, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestSimHasItsExperiments: tune, accuracy and boundary hang under sim.
func TestSimHasItsExperiments(t *testing.T) {
	cmd := newSimCmd()
	for _, name := range []string{"tune", "accuracy", "boundary"} {
		if sub, _, err := cmd.Find([]string{name}); err != nil || sub.Name() != name {
			t.Errorf("floodgate sim %s: %v", name, err)
		}
	}
}
