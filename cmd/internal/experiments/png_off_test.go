//go:build !plots

package experiments

import (
	"errors"
	"path/filepath"
	"testing"
)

// Without the plots tag a chart is still checked, and a valid one is
// refused with ErrNoPlots, which says how to build the floodgate that
// draws.
func TestWritePNGWithoutPlotsTag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.png")
	ok := Chart{Title: "t", Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{1}}}}
	if err := ok.WritePNG(path); !errors.Is(err, ErrNoPlots) {
		t.Errorf("valid chart: %v, want ErrNoPlots", err)
	}
	if err := (Chart{}).WritePNG(path); !errors.Is(err, ErrBadPlot) {
		t.Errorf("chart without a title: %v, want ErrBadPlot", err)
	}
}
