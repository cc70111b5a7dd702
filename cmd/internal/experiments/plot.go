package experiments

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrBadPlot is wrapped by every error a plot's validation returns.
var ErrBadPlot = errors.New("experiments: bad plot")

// Series is one named line of a plot: the points (X[i], Y[i]) in order.
type Series struct {
	Name string
	X, Y []float64
	// Dashed draws the line dashed: for references such as a limit or a bound,
	// so they read differently from measurements.
	Dashed bool
}

// Chart is a line plot with several named series. The zero values of Width
// and Height mean 16 cm × 10 cm.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// LogX and LogY put an axis on a log scale; every value on it must then
	// be positive.
	LogX, LogY    bool
	Width, Height vg.Length
}

// LinePlot draws series as a line plot with a title, axis labels and a
// legend, and writes it as a PNG to path.
func LinePlot(path, title, xLabel, yLabel string, series []Series) error {
	return Chart{Title: title, XLabel: xLabel, YLabel: yLabel, Series: series}.WritePNG(path)
}

// palette holds colours that stay apart in print and for common colour
// blindness (Okabe–Ito), in the order series take them.
var palette = []color.RGBA{
	{0, 114, 178, 255}, {213, 94, 0, 255}, {0, 158, 115, 255}, {204, 121, 167, 255},
	{230, 159, 0, 255}, {86, 180, 233, 255}, {0, 0, 0, 255}, {240, 228, 66, 255},
}

// WritePNG validates the chart, draws it and writes it as a PNG to path. The
// same chart always gives the same bytes.
func (c Chart) WritePNG(path string) error {
	if !strings.EqualFold(filepath.Ext(path), ".png") {
		return fmt.Errorf("%w: output %q must end in .png", ErrBadPlot, path)
	}
	p, err := c.build()
	if err != nil {
		return err
	}
	w, h := c.Width, c.Height
	if w == 0 {
		w = 16 * vg.Centimeter
	}
	if h == 0 {
		h = 10 * vg.Centimeter
	}
	if err := p.Save(w, h, path); err != nil {
		return fmt.Errorf("experiments: writing plot %q: %w", path, err)
	}
	return nil
}

func (c Chart) build() (*plot.Plot, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	if c.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if c.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	for i, s := range c.Series {
		pts := make(plotter.XYs, len(s.X))
		for j := range s.X {
			pts[j] = plotter.XY{X: s.X[j], Y: s.Y[j]}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("%w: series %q: %w", ErrBadPlot, s.Name, err)
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		if s.Dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(line)
		if len(pts) <= 40 && !s.Dashed { // few points: mark them, so a reader sees where data was taken
			dots, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("%w: series %q: %w", ErrBadPlot, s.Name, err)
			}
			dots.Color = line.Color
			dots.Shape = draw.CircleGlyph{}
			dots.Radius = vg.Points(2)
			p.Add(dots)
		}
		p.Legend.Add(s.Name, line)
	}
	c.frameY(p)
	return p, nil
}

// frameY starts a linear y axis at 0 when no value is negative, so heights
// compare at a glance, and raises its top so the legend (top left) sits
// above the data instead of on it.
func (c Chart) frameY(p *plot.Plot) {
	legend := 0.045*float64(len(c.Series)) + 0.03 // share of the height the legend takes
	if c.LogY {                                   // the same share of the decades shown
		p.Y.Max = p.Y.Min * math.Pow(p.Y.Max/p.Y.Min, 1/(1-legend))
		return
	}
	if p.Y.Min > 0 {
		p.Y.Min = 0
	}
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)/(1-legend)
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
