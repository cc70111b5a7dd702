package experiments

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrBadPlot is wrapped by every error a plot's validation returns.
var ErrBadPlot = errors.New("experiments: bad plot")

// ErrNoPlots is returned by WritePNG in a build without the plots tag:
// drawing links gonum.org/v1/plot with all its back ends (PDF, SVG, EPS,
// TeX), which the service does not need, so only a build with -tags plots
// draws.
var ErrNoPlots = errors.New("experiments: this floodgate was built without plots; build or run it with -tags plots (go run -tags plots ./cmd/floodgate ...)")

// Series is one named line of a plot: the points (X[i], Y[i]) in order.
type Series struct {
	Name string
	X, Y []float64
	// Dashed draws the line dashed: for references such as a limit or a bound,
	// so they read differently from measurements.
	Dashed bool
}

// Chart is a line plot with several named series. Width and Height are in
// centimetres; their zero values mean 16 cm × 10 cm.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// LogX and LogY put an axis on a log scale; every value on it must then
	// be positive.
	LogX, LogY    bool
	Width, Height float64
}

// LinePlot draws series as a line plot with a title, axis labels and a
// legend, and writes it as a PNG to path.
func LinePlot(path, title, xLabel, yLabel string, series []Series) error {
	return Chart{Title: title, XLabel: xLabel, YLabel: yLabel, Series: series}.WritePNG(path)
}

func (c Chart) validate() error {
	if strings.TrimSpace(c.Title) == "" {
		return fmt.Errorf("%w: no title", ErrBadPlot)
	}
	if len(c.Series) == 0 {
		return fmt.Errorf("%w: %q has no series", ErrBadPlot, c.Title)
	}
	for i, s := range c.Series {
		if strings.TrimSpace(s.Name) == "" {
			return fmt.Errorf("%w: series %d of %q has no name", ErrBadPlot, i, c.Title)
		}
		if len(s.X) == 0 || len(s.X) != len(s.Y) {
			return fmt.Errorf("%w: series %q has %d x values and %d y values (want the same, at least one)",
				ErrBadPlot, s.Name, len(s.X), len(s.Y))
		}
		if err := checkValues(s.Name, "x", s.X, c.LogX); err != nil {
			return err
		}
		if err := checkValues(s.Name, "y", s.Y, c.LogY); err != nil {
			return err
		}
	}
	return nil
}

func checkValues(series, axis string, vs []float64, logScale bool) error {
	for i, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: series %q: %s[%d] is %v", ErrBadPlot, series, axis, i, v)
		}
		if logScale && v <= 0 {
			return fmt.Errorf("%w: series %q: %s[%d] = %v is not positive, which a log axis needs", ErrBadPlot, series, axis, i, v)
		}
	}
	return nil
}
