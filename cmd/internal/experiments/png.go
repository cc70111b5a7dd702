//go:build plots

package experiments

import (
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

// Drawable reports whether this build draws charts: nil, it does (see
// ErrNoPlots for the build that does not).
func Drawable() error { return nil }

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
	w, h := vg.Length(c.Width)*vg.Centimeter, vg.Length(c.Height)*vg.Centimeter
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
