package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// A route's concurrency block becomes its bulkhead; a route without one
// has none of its own (the proxy's --concurrency applies).
func TestRouteConcurrency(t *testing.T) {
	set, err := config.LoadFiles("testdata/routes/bulkheads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*policy.Concurrency{
		"health":          {Off: true},
		"reports":         {Limit: 8},
		"api":             {Algorithm: "vegas", Queue: 20, MaxWait: 50 * time.Millisecond},
		"search":          {Queue: 5, MaxWait: policy.DefaultMaxWait}, // a queue without max_wait waits the default
		"everything else": nil,
	}
	for _, rt := range set.Routes() {
		got, w := rt.Concurrency, want[rt.Name]
		if (got == nil) != (w == nil) || got != nil && *got != *w {
			t.Errorf("route %q: concurrency %+v, want %+v", rt.Name, got, w)
		}
	}
}

// Bad concurrency blocks are refused with the file, the line of the
// setting at fault and the problem.
func TestInvalidRouteConcurrency(t *testing.T) {
	const head = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n" +
		"routes:\n  - name: r\n    descriptors: []\n    concurrency:\n"
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"not a mapping", "      - 5\n", 7, `route "r": concurrency must be a mapping, not a list`},
		{"no limit", "      queue: 3\n", 7, "concurrency: limit is required: adaptive, off or a whole number"},
		{"zero limit", "      limit: 0\n", 7, `concurrency: limit "0": want adaptive, off or a whole number from 1 to 1048576`},
		{"negative limit", "      limit: -4\n", 7, `limit "-4"`},
		{"huge limit", "      limit: 99999999999\n", 7, `limit "99999999999"`},
		{"limit a word", "      limit: auto\n", 7, `limit "auto": want adaptive, off`},
		{"limit a list", "      limit: [1]\n", 7, "concurrency: limit must be a string, not a list"},
		{"misspelt field", "      limit: adaptive\n      algoritm: aimd\n", 8, `unknown field "algoritm" (did you mean "algorithm"?)`},
		{"unknown algorithm", "      limit: adaptive\n      algorithm: cubic\n", 8, `algorithm "cubic": want gradient2, aimd or vegas`},
		{"algorithm with a fixed limit", "      limit: 10\n      algorithm: aimd\n", 8, "algorithm aimd: a fixed limit (10) learns nothing"},
		{"negative queue", "      limit: adaptive\n      queue: -1\n", 8, "queue must not be negative"},
		{"queue too large", "      limit: 4\n      queue: 2000000\n", 8, "queue 2000000 is too large"},
		{"max_wait without a queue", "      limit: 4\n      max_wait: 1s\n", 8, "max_wait 1s without a queue"},
		{"max_wait not a duration", "      limit: 4\n      queue: 2\n      max_wait: soon\n", 9, `max_wait must be a positive duration such as 1s`},
		{"max_wait zero", "      limit: 4\n      queue: 2\n      max_wait: 0s\n", 9, "max_wait must be a positive duration"},
		{"off with a queue", "      limit: off\n      queue: 2\n", 7, "limit off takes no algorithm, queue or max_wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("routes.yaml", []byte(head+tc.yaml))
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *config.Error", err)
			}
			if ce.File != "routes.yaml" || ce.Line != tc.line || !strings.Contains(ce.Msg, tc.want) {
				t.Errorf("got %q, want routes.yaml:%d: ...%s...", err, tc.line, tc.want)
			}
		})
	}
}

// No concurrency block panics the decoder; every one it accepts passes
// Check, and every error is a *config.Error naming the file.
//
//	go test -run '^$' -fuzz FuzzRouteConcurrency -fuzztime 60s ./internal/config/
func FuzzRouteConcurrency(f *testing.F) {
	if seed, err := os.ReadFile("testdata/routes/bulkheads.yaml"); err == nil {
		f.Add(string(seed))
	}
	for _, block := range []string{
		"{limit: adaptive}", "{limit: 5, queue: 3, max_wait: 10ms}", "{limit: off}", "{limit: adaptive, algorithm: aimd}",
		"{limit: '7', queue: 0x10}", "{limit: adaptive, <<: {queue: 2}}", "{limit: -1}", "[]", "~",
	} {
		f.Add("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n" +
			"routes: [{name: r, descriptors: [], concurrency: " + block + "}]\n")
	}
	f.Fuzz(func(t *testing.T, data string) {
		p, err := config.Parse("fuzz.yaml", []byte(data))
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) || ce.File != "fuzz.yaml" || ce.Msg == "" {
				t.Fatalf("error %v (%T) is not a *config.Error naming the file and a problem", err, err)
			}
			return
		}
		for _, rt := range p.Routes() {
			if c := rt.Concurrency; c != nil {
				if err := c.Check(); err != nil {
					t.Fatalf("route %q: accepted %+v: %v", rt.Name, *c, err)
				}
				if !c.Off && c.Queue > 0 && c.MaxWait <= 0 {
					t.Fatalf("route %q: a queue without a wait: %+v", rt.Name, *c)
				}
			}
		}
	})
}
