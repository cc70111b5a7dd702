package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
)

func TestTruncate(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	for _, tc := range []struct {
		name, in string
		kept     bool // returned as is
	}{
		{"short", "api.report_q3", true},
		{"exactly the maximum", strings.Repeat("a", metrics.MaxLabelBytes), true},
		{"one byte over", strings.Repeat("a", metrics.MaxLabelBytes+1), false},
		{"a megabyte", long, false},
		{"invalid UTF-8", "api.report_\xff", false},
		{"cut inside a character", strings.Repeat("é", metrics.MaxLabelBytes), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := metrics.Truncate(tc.in)
			switch {
			case tc.kept && got != tc.in:
				t.Fatalf("Truncate changed %q to %q", tc.in, got)
			case len(got) > metrics.MaxLabelBytes || !utf8.ValidString(got):
				t.Fatalf("Truncate gave %d bytes, valid UTF-8 %v: %q", len(got), utf8.ValidString(got), got)
			case !tc.kept && !strings.Contains(got, "…"):
				t.Fatalf("a cut label %q does not show the cut", got)
			}
		})
	}
}

// Distinct values keep distinct labels; the same value, the same label.
func TestTruncateKeepsValuesApart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prefix := strings.Repeat("p", rapid.IntRange(0, 3*metrics.MaxLabelBytes).Draw(t, "prefix"))
		a := prefix + rapid.String().Draw(t, "a")
		b := prefix + rapid.String().Draw(t, "b")
		if first := metrics.Truncate(a); metrics.Truncate(a) != first {
			t.Fatal("one value, two labels")
		}
		if a != b && metrics.Truncate(a) == metrics.Truncate(b) {
			t.Fatalf("%q and %q share the label %q", a, b, metrics.Truncate(a))
		}
	})
}

// The attack of issue 12: 300 limit names of 1 MB (values from requests)
// once made a 300 MB scrape. Each label is now at most MaxLabelBytes, so
// the scrape stays within a few hundred bytes per series, and distinct
// values stay distinct series.
func TestLongLimitNamesKeepTheScrapeSmall(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{})
	value := []byte(strings.Repeat("v", 1<<20))
	for i := range 300 {
		copy(value, fmt.Sprintf("%04d", i)) // distinct values
		o.Observe(ctx, event("api", string(value), observe.Allowed, 9))
	}
	body := scrape(t, o)
	if n := series(body, "floodgate_decisions_total"); n != 300 {
		t.Fatalf("%d decision series, want 300: distinct values must stay distinct", n)
	}
	const perSeries = 300 // bytes: the labels and the count
	if max := 300*perSeries + 16<<10; len(body) > max {
		t.Fatalf("a scrape of %d bytes, want at most %d", len(body), max)
	}
}
