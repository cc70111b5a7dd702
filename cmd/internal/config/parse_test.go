package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// Every file of testdata/valid loads, and together they make one Set.
func TestValidFilesLoad(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no files in testdata/valid")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := config.Parse(f, data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.Domain == "" || p.File != f {
				t.Errorf("Domain %q, File %q", p.Domain, p.File)
			}
			for _, r := range p.Rules() {
				if r.Unlimited || r.DeniesAll() {
					continue
				}
				if err := r.Limit.Validate(); err != nil {
					t.Errorf("%s: %v", r.Path, err)
				}
			}
		})
	}
	set, err := config.LoadFiles("testdata/valid")
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	if got := len(set.Domains()); got != len(files) {
		t.Errorf("%d domains from %d files: %v", got, len(files), set.Domains())
	}
}

// Every file of testdata/invalid is refused with an error that names the
// file, the line and the problem.
func TestInvalidFiles(t *testing.T) {
	tests := []struct {
		file string
		line int
		want string
	}{
		{"bad_unit.yaml", 6, `descriptor "cart_bulk": rate_limit: invalid unit "fortnight" (want one of second, minute, hour, day, week, month, year)`},
		{"broken_yaml.yaml", 3, "invalid YAML: did not find expected ',' or ']'"},
		{"duplicate_descriptor.yaml", 6, `descriptor "cart_bulk": duplicate descriptor: key "cart" with value "bulk" is already defined at this level`},
		{"missing_key.yaml", 3, "descriptors[0]: key is required"},
		{"empty_key.yaml", 3, "descriptors[0]: key is required"},
		{"misspelled_field.yaml", 5, `descriptor "cart_bulk": unknown field "ratelimit" (did you mean "rate_limit"?)`},
		{"replaces_itself.yaml", 9, `descriptor "cart_bulk.item": rate_limit: limit "loop" replaces itself`},
		{"unlimited_with_unit.yaml", 6, `descriptor "cart": rate_limit: unit must not be set on an unlimited limit`},
		{"bad_algorithm.yaml", 5, `unknown algorithm "token-bucket" (want one of token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_window)`},
		{"unit_and_period.yaml", 6, "give unit or period, not both"},
		{"rate_limit_and_rate_limits.yaml", 7, "give rate_limit or rate_limits, not both"},
		{"bad_failure_mode.yaml", 7, `unknown failure_mode "fail_sometimes" (want one of fail_open, fail_closed, fail_local)`},
		{"bad_strategy.yaml", 7, `unknown strategy "gossipy" (want one of exact, local, leased, synced, sampled, gossip)`},
		{"burst_on_window.yaml", 7, "burst applies to token_bucket and leaky_bucket only, not to fixed_window"},
		{"bad_period.yaml", 5, `period must be a positive duration such as 1s, 5m or 1500ms, not "5 minutes"`},
		{"strategy_param_mismatch.yaml", 7, "strategy: strategy local has no interval (leased, synced and gossip have)"},
		{"strategy_without_name.yaml", 7, "strategy: name is missing (want one of exact, local, leased, synced, sampled, gossip)"},
		{"strategy_one_in_zero.yaml", 7, "strategy: one_in must be at least 1, got 0"},
		{"period_not_microseconds.yaml", 5, "invalid limit: period 1.5µs is not a whole number of microseconds"},
		{"negative_rate.yaml", 6, "requests_per_unit must not be negative, got -3"},
		{"missing_requests_per_unit.yaml", 5, "requests_per_unit is required (0 denies every request)"},
		{"missing_domain.yaml", 1, "domain is required"},
		{"share_threshold_without_wildcard.yaml", 5, `share_threshold needs a wildcard value`},
		{"duplicate_field.yaml", 7, `field "requests_per_unit" is given twice`},
		{"two_documents.yaml", 3, "a second YAML document"},
		{"duplicate_limit_name.yaml", 8, `rate_limits[1]: name "rpm" is used by another limit of this descriptor`},
		{"empty_replaces_name.yaml", 6, "replaces[0]: name is required"},
		{"unknown_top_level_field.yaml", 2, `unknown field "descriptor" (did you mean "descriptors"?)`},
		{"bad_counts.yaml", 9, `descriptor "api_key": rate_limits[1]: counts: "tokens" is not a kind of count: want requests (1 per request) or units (the request's cost)`},
		{"route_cost_unknown_limit.yaml", 12, `route "completions": costs: no limit of domain "tokens" is named "tpn" (its named limits: rpm, tpm)`},
		{"counts_on_unlimited.yaml", 7, `descriptor "api_key_internal": rate_limit: counts must not be set on an unlimited limit`},
	}
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) != len(tests) {
		t.Errorf("%d files in testdata/invalid, %d cases here: give every file a case", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "invalid", tt.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = config.Parse(path, data)
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error %v (%T), want a *config.Error", err, err)
			}
			if ce.File != path || ce.Line != tt.line || !strings.Contains(ce.Msg, tt.want) {
				t.Errorf("got  %v\nwant %s:%d: ...%s...", err, path, tt.line, tt.want)
			}
			if !strings.HasPrefix(err.Error(), path+":") {
				t.Errorf("error %q does not start with the file name", err)
			}
		})
	}
}

// A limit the engine refuses wraps floodgate.ErrInvalidLimit.
func TestInvalidLimitWrapsErrInvalidLimit(t *testing.T) {
	_, err := config.Parse("x.yaml", []byte(`
domain: x
descriptors:
  - key: k
    rate_limit: {algorithm: token_bucket, period: 1h, requests_per_unit: 3, burst: 1125899906842625}
`))
	if !errors.Is(err, floodgate.ErrInvalidLimit) {
		t.Fatalf("got %v, want an error wrapping floodgate.ErrInvalidLimit", err)
	}
	if want := `x.yaml:5: descriptor "k": rate_limit: invalid limit: burst 1125899906842625 exceeds the maximum`; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got  %v\nwant %s...", err, want)
	}
}

// What each way of writing a rate_limit turns into.
func TestParseLimit(t *testing.T) {
	tests := []struct {
		name      string
		rateLimit string
		want      floodgate.Limit
	}{
		{"envoy unit second", `{unit: second, requests_per_unit: 10}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Second}},
		{"unit in capitals, as Envoy allows", `{unit: MINUTE, requests_per_unit: 10}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Minute}},
		{"hour", `{unit: hour, requests_per_unit: 1}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Hour}},
		{"day", `{unit: day, requests_per_unit: 1}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: 24 * time.Hour}},
		{"week is 7 days", `{unit: week, requests_per_unit: 1}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: 7 * 24 * time.Hour}},
		{"month is 30 days", `{unit: month, requests_per_unit: 1}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: 30 * 24 * time.Hour}},
		{"year is 365 days", `{unit: year, requests_per_unit: 1}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: 365 * 24 * time.Hour}},
		{"free period", `{period: 1500ms, requests_per_unit: 3}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 3, Period: 1500 * time.Millisecond}},
		{"algorithm and burst", `{algorithm: token_bucket, unit: second, requests_per_unit: 5, burst: 20}`, floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 5, Period: time.Second, Burst: 20}},
		{"numbers in YAML's other notations", `{unit: second, requests_per_unit: 1_000}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Second}},
		{"hex", `{unit: second, requests_per_unit: 0x10}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 16, Period: time.Second}},
		{"0 denies everything", `{unit: second, requests_per_unit: 0}`, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 0, Period: time.Second}},
		{"unlimited", `{unlimited: true}`, floodgate.Limit{}},
		{"unlimited, YAML 1.1 spelling", `{unlimited: yes}`, floodgate.Limit{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := config.Parse("t.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: "+tt.rateLimit+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			rules := p.Rules()
			if len(rules) != 1 {
				t.Fatalf("%d rules", len(rules))
			}
			if rules[0].Limit != tt.want {
				t.Errorf("Limit %+v, want %+v", rules[0].Limit, tt.want)
			}
			if rules[0].Unlimited != (tt.want == floodgate.Limit{}) {
				t.Errorf("Unlimited %v", rules[0].Unlimited)
			}
		})
	}
}

// What a limit counts: units (the request's cost) unless it says requests.
func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		name, rateLimit string
		want            policy.Counts
	}{
		{"units by default, as in Envoy", `{unit: minute, requests_per_unit: 60}`, policy.CountsUnits},
		{"units", `{unit: minute, requests_per_unit: 60, counts: units}`, policy.CountsUnits},
		{"requests", `{unit: minute, requests_per_unit: 60, counts: requests}`, policy.CountsRequests},
		{"requests, on a limit that denies everything", `{unit: minute, requests_per_unit: 0, counts: requests}`, policy.CountsRequests},
		{"nothing on an unlimited limit", `{unlimited: true}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := config.Parse("t.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: "+tc.rateLimit+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Rules()[0].Counts; got != tc.want {
				t.Errorf("Counts %q, want %q", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`counts: Requests`, `counts: ""`, `counts: [requests]`, `counts: 1`} {
		_, err := config.Parse("t.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n      "+bad+"\n"))
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Line != 7 || !strings.Contains(ce.Msg, "counts") {
			t.Errorf("%s: %v, want an error at t.yaml:7 about counts", bad, err)
		}
	}
}

// The fields a rule carries from its descriptor and its rate_limit.
func TestRuleFields(t *testing.T) {
	set := loadValid(t)
	p, _ := set.Policy("llm")
	rules := p.Rules()
	if len(rules) != 4 {
		t.Fatalf("%d rules in llm, want 4", len(rules))
	}
	tpm := rules[3]
	want := policy.Rule{
		Name:        "tpm",
		Limit:       floodgate.Limit{Algorithm: floodgate.SlidingWindow, Rate: 90000, Period: time.Minute},
		FailureMode: failover.FailLocal,
		Strategy:    policy.StrategyExact,
		Counts:      policy.CountsUnits,
		Domain:      "llm",
		Path:        "llm.model_large",
		Index:       1,
		Count:       2,
		File:        filepath.Join("testdata", "valid", "multiple_limits.yaml"),
		Line:        28,
	}
	if rpm := rules[2]; rpm.Name != "rpm" || rpm.Counts != policy.CountsRequests {
		t.Errorf("rpm: %q counts %q, want rpm counting requests", rpm.Name, rpm.Counts)
	}
	if tpm.Name != want.Name || tpm.Limit != want.Limit || tpm.FailureMode != want.FailureMode ||
		tpm.Strategy != want.Strategy || tpm.Counts != want.Counts || tpm.Domain != want.Domain || tpm.Path != want.Path ||
		tpm.Index != want.Index || tpm.Count != want.Count || tpm.File != want.File || tpm.Line != want.Line {
		t.Errorf("got  %+v\nwant %+v", tpm, want)
	}

	g, _ := set.Policy("gateway")
	var model policy.Rule
	for _, r := range g.Rules() {
		if r.Path == "gateway.model_small" {
			model = r
		}
	}
	if !model.QuotaMode {
		t.Error("quota_mode not carried")
	}
	route, _ := model.Metadata["route"].(map[string]any)
	if route["backend"] != "small-pool" || route["weight"] != int64(3) {
		t.Errorf("Metadata %#v", model.Metadata)
	}
}

// Anchors, aliases and merge keys work as in any YAML.
func TestAnchorsAndMergeKeys(t *testing.T) {
	set := loadValid(t)
	for value, rate := range map[string]int64{"free": 10, "trial": 10, "pro": 100} {
		rules, ok := set.Match("anchored", desc("plan", value))
		if !ok || rules[0].Limit.Rate != rate || rules[0].Limit.Period != time.Minute {
			t.Errorf("plan=%s: %+v, want %d/minute", value, rules, rate)
		}
	}
}

// Aliases that expand exponentially are refused, quickly: within a second
// of the time the scheduler let the test run (an expansion would take
// hours).
func TestAliasBomb(t *testing.T) {
	// Ten levels of ten aliases each: 10^10 nodes once expanded.
	src := "domain: d\ndescriptors:\n  - key: k\n    metadata:\n      l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 9; i++ {
		prev := fmt.Sprintf("*l%d", i-1)
		src += fmt.Sprintf("      l%d: &l%d [%s]\n", i, i, strings.Repeat(prev+", ", 9)+prev)
	}
	probe := timing.StartProbe(t)
	start := time.Now()
	_, err := config.Parse("bomb.yaml", []byte(src))
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Errorf("got %v, want a 'too complex' error", err)
	}
	if over := probe.Over(start, took, time.Second); over > timing.Slack {
		t.Errorf("took %v, more than a second and the %v the scheduler was late; %v", took, probe.Late(start, start.Add(took)), probe)
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.yaml", "domain: one\n")
	b := write("b.yml", "domain: two\n")
	write("notes.txt", "not a policy")
	write(".hidden.yaml", "broken: [")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("sub/c.yaml", "domain: three\n")

	t.Run("a directory gives its yaml and yml files", func(t *testing.T) {
		set, err := config.LoadFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(set.Domains(), ","); got != "one,two" {
			t.Errorf("Domains %s, want one,two", got)
		}
	})
	t.Run("files are taken by name whatever their extension", func(t *testing.T) {
		txt := write("policy.conf", "domain: four\n")
		set, err := config.LoadFiles(a, txt)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(set.Domains(), ","); got != "four,one" {
			t.Errorf("Domains %s", got)
		}
	})
	t.Run("two files with one domain", func(t *testing.T) {
		dup := write("dup.conf", "# the same domain again\ndomain: two\n")
		_, err := config.LoadFiles(b, dup)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.File != dup || ce.Line != 2 || ce.Msg != `domain "two" is already defined in `+b {
			t.Errorf("got %v", err)
		}
	})
	t.Run("every broken file is reported", func(t *testing.T) {
		bad1 := write("bad1.conf", "domain: [\n")
		bad2 := write("bad2.conf", "descriptors: []\n")
		missing := filepath.Join(dir, "missing.yaml")
		_, err := config.LoadFiles(bad1, a, bad2, missing)
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{bad1 + ":", bad2 + ":", missing + ": cannot read: no such file or directory"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Error("errors.As finds no *config.Error")
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Error("the missing file's error does not wrap os.ErrNotExist")
		}
	})
}

func TestEmptyInputs(t *testing.T) {
	for _, src := range []string{"", "\n", "# only a comment\n", "~\n", "---\n"} {
		_, err := config.Parse("e.yaml", []byte(src))
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "empty file") {
			t.Errorf("%q: got %v, want an 'empty file' error", src, err)
		}
	}
	p, err := config.Parse("e.yaml", []byte("domain: quiet\n"))
	if err != nil || len(p.Rules()) != 0 {
		t.Errorf("a domain without descriptors: %v, %v", p, err)
	}
}

// Errors about the shape of the YAML, each with its line.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		want string
	}{
		{"the file is a list", "- a\n", 1, `the file must be a mapping, not a list`},
		{"the domain is a list", "domain: [a]\n", 1, `domain must be a string, not a list`},
		{"descriptors is a mapping", "domain: d\ndescriptors: {key: a}\n", 2, `descriptors must be a list, not a mapping`},
		{"a descriptor is a string", "domain: d\ndescriptors: [a]\n", 2, `descriptors[0] must be a mapping, not "a"`},
		{"a key is a list", "domain: d\ndescriptors:\n  - key: [a]\n", 3, `descriptors[0]: key must be a string, not a list`},
		{"a field name is a list", "domain: d\n[a]: b\n", 2, `field names must be strings, not a list`},
		{"a boolean is a word", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: sometimes\n", 4,
			`descriptor "a": shadow_mode must be true or false, not "sometimes"`},
		{"a quoted boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: 'true'\n", 4, `must be true or false, not "true"`},
		{"a rate is a word", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: ten}\n", 4,
			`requests_per_unit must be a whole number, not "ten"`},
		{"a rate is a quoted number", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: '10'}\n", 4,
			`requests_per_unit must be a whole number, not "10"`},
		{"a rate is a fraction", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 2.5}\n", 4,
			`requests_per_unit must be a whole number, not "2.5"`},
		{"a rate too large for 64 bits", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 99999999999999999999}\n", 4,
			`requests_per_unit 99999999999999999999 is too large`},
		{"a rate too large for the engine", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 9999999999999999}\n", 4,
			`invalid limit: rate 9999999999999999 exceeds the maximum`},
		{"a limit without a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}\n", 4,
			`rate_limit: a unit (second, minute, hour, day, week, month, year) or a period is required, or unlimited: true`},
		{"an empty rate_limits", "domain: d\ndescriptors:\n  - key: a\n    rate_limits: []\n", 4, `rate_limits is empty`},
		{"rate_limits is a mapping", "domain: d\ndescriptors:\n  - key: a\n    rate_limits: {unit: second}\n", 4, `rate_limits must be a list, not a mapping`},
		{"an error in the second limit", "domain: d\ndescriptors:\n  - key: a\n    rate_limits:\n      - {unit: second, requests_per_unit: 1}\n      - {unit: second, requests_per_unit: 1, burst: 2}\n", 6,
			`descriptor "a": rate_limits[1]: burst applies to token_bucket and leaky_bucket only`},
		{"burst on a limit of 0", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 0, burst: 2}\n", 4,
			`burst needs a requests_per_unit above 0`},
		{"algorithm on an unlimited limit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      algorithm: token_bucket\n", 6,
			`algorithm must not be set on an unlimited limit`},
		{"replaces is a mapping", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: {name: b}}\n", 4,
			`replaces must be a list, not a mapping`},
		{"replaces with another field", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{nme: b}]\n", 7,
			`replaces[0]: unknown field "nme" (did you mean "name"?)`},
		{"metadata is a list", "domain: d\ndescriptors:\n  - key: a\n    metadata: [1]\n", 4, `metadata must be a mapping, not a list`},
		{"a nested error names the path", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    descriptors:\n      - key: c\n        descriptors:\n          - key: e\n            shadow_mod: true\n", 9,
			`descriptor "a_b.c.e": unknown field "shadow_mod" (did you mean "shadow_mode"?)`},
		{"a nested descriptor without a key", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - value: b\n", 5,
			`descriptor "a": descriptors[0]: key is required`},
		{"a duplicate key-only descriptor", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n", 4,
			`duplicate descriptor: key "a" without a value is already defined at this level`},
		{"a merge of a scalar", "domain: d\ndescriptors:\n  - key: a\n    <<: 3\n", 4, `merged value must be a mapping`},
		{"an unknown anchor", "domain: d\ndescriptors: *nowhere\n", 0, `invalid YAML: unknown anchor 'nowhere' referenced`},
		{"a tab for indentation", "domain: d\ndescriptors:\n\t- key: a\n", 3, `invalid YAML: found character that cannot start any token`},
		{"a key out of line", "domain: d\ndescriptors:\n  - key: a\n value: b\n", 4, `invalid YAML: did not find expected key`},
		{"an undefined tag handle", "domain: d\ndescriptors: !x!y []\n", 2, `invalid YAML: found undefined tag handle`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("p.yaml", []byte(tt.src))
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if ce.Line != tt.line || !strings.Contains(ce.Msg, tt.want) {
				t.Errorf("got  %v\nwant p.yaml:%d: ...%s...", err, tt.line, tt.want)
			}
		})
	}
}

// Descriptors without a limit, descriptors given as null, and the other
// quiet corners of the format.
func TestParseQuietCorners(t *testing.T) {
	p, err := config.Parse("q.yaml", []byte(`
domain: d
descriptors:
  - key: a
    value: ~          # null: no value, a key-only descriptor
    rate_limit: ~     # null: no limit
  - key: 7            # numbers are text
    value: true       # so are booleans, as Envoy's YAML library reads them
    rate_limit:
      unit: second
      requests_per_unit: 1
      name: ~
      replaces: ~
    metadata: {n: 1, f: 1.5, b: true, s: x, "null": ~, list: [1, two]}
    descriptors: ~
  - key: b
    rate_limits:
      - <<: {unit: second, requests_per_unit: 1}
        name: first
      - <<: [{unit: minute}, {unit: hour, requests_per_unit: 2}]
        name: second
`))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := policy.NewSet(p)
	if rules, ok := set.Match("d", desc("a", "x")); ok {
		t.Errorf("a: %v", rules)
	}
	rules, ok := set.Match("d", desc("7", "true"))
	if !ok || rules[0].Limit.Rate != 1 {
		t.Fatalf("7=true: %v, %v", rules, ok)
	}
	want := map[string]any{"n": int64(1), "f": 1.5, "b": true, "s": "x", "null": nil, "list": []any{int64(1), "two"}}
	if fmt.Sprint(rules[0].Metadata) != fmt.Sprint(want) {
		t.Errorf("Metadata %#v, want %#v", rules[0].Metadata, want)
	}
	rules, _ = set.Match("d", desc("b", "x"))
	if got := summary(rules, true); got != "first:1/1s+second:2/1m0s" {
		t.Errorf("merge keys: %s, want first:1/1s+second:2/1m0s (the first merged mapping wins)", got)
	}
}

// A limit's strategy, by name or with its own parameters.
func TestStrategyParams(t *testing.T) {
	set := loadValid(t)
	p, _ := set.Policy("fleet")
	want := map[string]struct {
		strategy policy.Strategy
		params   policy.StrategyParams
	}{
		"exact":   {policy.StrategyExact, policy.StrategyParams{}},
		"local":   {policy.StrategyLocal, policy.StrategyParams{}},
		"leased":  {policy.StrategyLeased, policy.StrategyParams{Interval: 250 * time.Millisecond}},
		"synced":  {policy.StrategySynced, policy.StrategyParams{Interval: time.Second}},
		"sampled": {policy.StrategySampled, policy.StrategyParams{OneIn: 20}},
		"gossip":  {policy.StrategyGossip, policy.StrategyParams{Interval: 50 * time.Millisecond}},
	}
	rules := p.Rules()
	if len(rules) != len(want) {
		t.Fatalf("%d rules, want %d", len(rules), len(want))
	}
	for _, r := range rules {
		w := want[r.Path[len("fleet."):]]
		if r.Strategy != w.strategy || r.StrategyParams != w.params {
			t.Errorf("%s: %s %+v, want %s %+v", r.Path, r.Strategy, r.StrategyParams, w.strategy, w.params)
		}
	}
}
