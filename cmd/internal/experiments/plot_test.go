//go:build plots

package experiments

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLinePlotIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	series := []Series{
		{Name: "local", X: []float64{0.1, 1, 10}, Y: []float64{0, 0, 0}},
		{Name: "synced", X: []float64{0.1, 1, 10}, Y: []float64{0.01, 0.1, 1}},
		{Name: "tolerance", X: []float64{0.1, 10}, Y: []float64{0.05, 0.05}, Dashed: true},
	}
	var images [][]byte
	for _, name := range []string{"a.png", "b.png"} {
		path := filepath.Join(dir, name)
		if err := LinePlot(path, "Overshoot vs T", "T (s)", "overshoot", series); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("%s is not a PNG", name)
		}
		images = append(images, b)
	}
	if !bytes.Equal(images[0], images[1]) {
		t.Error("the same plot drawn twice gave different bytes")
	}
}

func TestChartRejectsBadInput(t *testing.T) {
	ok := Series{Name: "s", X: []float64{1, 2}, Y: []float64{1, 2}}
	tests := []struct {
		name  string
		chart Chart
		path  string
	}{
		{"not a png path", Chart{Title: "t", Series: []Series{ok}}, "plot.svg"},
		{"no title", Chart{Series: []Series{ok}}, "p.png"},
		{"no series", Chart{Title: "t"}, "p.png"},
		{"unnamed series", Chart{Title: "t", Series: []Series{{X: []float64{1}, Y: []float64{1}}}}, "p.png"},
		{"lengths differ", Chart{Title: "t", Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{1}}}}, "p.png"},
		{"empty series", Chart{Title: "t", Series: []Series{{Name: "s"}}}, "p.png"},
		{"NaN", Chart{Title: "t", Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{math.NaN()}}}}, "p.png"},
		{"zero on a log axis", Chart{Title: "t", LogX: true, Series: []Series{{Name: "s", X: []float64{0, 1}, Y: []float64{1, 1}}}}, "p.png"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), tt.path)
		if err := tt.chart.WritePNG(path); !errors.Is(err, ErrBadPlot) {
			t.Errorf("%s: error = %v, want one wrapping ErrBadPlot", tt.name, err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a file was written despite the error", tt.name)
		}
	}
}

func TestChartWriteFailsOnMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "p.png")
	err := LinePlot(path, "t", "x", "y", []Series{{Name: "s", X: []float64{1}, Y: []float64{1}}})
	if err == nil || errors.Is(err, ErrBadPlot) {
		t.Errorf("error = %v, want a write error (not a validation one)", err)
	}
}

// Each experiment's chart is valid and draws.
func TestExperimentChartsDraw(t *testing.T) {
	b, err := BoundaryBurst(BoundaryConfig{Rate: 10, Period: time.Second, Width: 100 * time.Millisecond, Samples: 31})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ClockSkew(SkewConfig{Nodes: 2, Rate: 10, Period: time.Second, Periods: 20, Skews: []time.Duration{0, time.Second / 2}})
	if err != nil {
		t.Fatal(err)
	}
	a := []AccuracyResult{
		{Shape: Shape{TailIndex: 2, Load: 0.1}, Requests: 100, Replay: Disagreement{WronglyAllowed: 1}},
		{Shape: Shape{TailIndex: 2, Load: 0.01}, Requests: 100},
		{Shape: Shape{TailIndex: 1.5, Load: 0.1}, Requests: 100, Replay: Disagreement{WronglyDenied: 3}},
	}
	acc := AccuracyChart(a)
	if len(acc.Series) != 3 || acc.Series[1].X[0] != 0.1 || !acc.Series[2].Dashed {
		t.Errorf("accuracy chart series %+v, want one per tail index, each sorted by load, then the published figure dashed", acc.Series)
	}
	if name := acc.Series[1].Name; name != "tail index α = 2 (zeros left out)" {
		t.Errorf("series with a zero (which a log axis cannot show) is named %q, want it to say it was left out", name)
	}
	for name, c := range map[string]Chart{"boundary": BoundaryChart(b), "skew": SkewChart(s), "accuracy": acc} {
		if err := c.WritePNG(filepath.Join(t.TempDir(), name+".png")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
