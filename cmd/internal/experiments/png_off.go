//go:build !plots

package experiments

// WritePNG validates the chart and returns ErrNoPlots: this build cannot
// draw (see ErrNoPlots). Build with -tags plots for the one that does.
func (c Chart) WritePNG(path string) error {
	if err := c.validate(); err != nil {
		return err
	}
	return ErrNoPlots
}

// Drawable reports whether this build draws charts: ErrNoPlots here, so
// that a command that would draw fails before it computes anything.
func Drawable() error { return ErrNoPlots }
