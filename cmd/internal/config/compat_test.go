package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// envoyCorpus is the configuration corpus of envoyproxy/ratelimit. It is
// another project's files, so it is not in this repository: the tests read
// it from FLOODGATE_ENVOY_CORPUS, or from ../shared/compat/envoy-ratelimit
// beside the repository's root, and skip without it, saying so, unless
// FLOODGATE_REQUIRE_ENVOY_CORPUS=1 (set by .ci/run where the corpus is)
// makes its absence a failure.
func envoyCorpus() string {
	if dir := os.Getenv("FLOODGATE_ENVOY_CORPUS"); dir != "" {
		return dir
	}
	return "../../../../shared/compat/envoy-ratelimit"
}

func corpus(t *testing.T) string {
	t.Helper()
	dir := envoyCorpus()
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("FLOODGATE_REQUIRE_ENVOY_CORPUS") == "1" {
			t.Fatalf("the envoyproxy/ratelimit corpus is required and not at %s: %v", dir, err)
		}
		t.Skipf("SKIPPED: the envoyproxy/ratelimit corpus is not at %s (set FLOODGATE_ENVOY_CORPUS): %v", dir, err)
	}
	return dir
}

func loadCorpusFile(t *testing.T, name string) *policy.Set {
	t.Helper()
	path := filepath.Join(corpus(t), "valid", name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is not in the corpus", name)
	}
	set, err := config.LoadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Every valid file of the corpus loads; every invalid one is refused with an
// error that names the problem.
func TestEnvoyCorpus(t *testing.T) {
	dir := corpus(t)
	valid, _ := filepath.Glob(filepath.Join(dir, "valid", "*.yaml"))
	invalid, _ := filepath.Glob(filepath.Join(dir, "invalid", "*.yaml"))
	if len(valid) == 0 || len(invalid) == 0 {
		t.Fatalf("corpus incomplete: %d valid, %d invalid files", len(valid), len(invalid))
	}
	for _, f := range valid {
		t.Run("valid/"+filepath.Base(f), func(t *testing.T) {
			if _, err := config.LoadFiles(f); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
	problems := map[string]string{
		"bad_limit_unit.yaml":      `invalid unit "foo"`,
		"bad_yaml.yaml":            "invalid YAML",
		"duplicate_key.yaml":       "duplicate descriptor",
		"empty_key.yaml":           "key is required",
		"misspelled_key.yaml":      `unknown field "ratelimit"`,
		"replaces_self.yaml":       `limit "self" replaces itself`,
		"unlimited_with_unit.yaml": "unit must not be set on an unlimited limit",
	}
	for _, f := range invalid {
		t.Run("invalid/"+filepath.Base(f), func(t *testing.T) {
			_, err := config.LoadFiles(f)
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if ce.File != f || !strings.HasPrefix(err.Error(), f+":") {
				t.Errorf("error %q does not name the file", err)
			}
			if want, ok := problems[filepath.Base(f)]; ok && !strings.Contains(ce.Msg, want) {
				t.Errorf("got %v, want it to say %q", err, want)
			}
			t.Log(err)
		})
	}
}

// The matches envoyproxy/ratelimit's own tests expect of its files
// (test/config/config_test.go: TestBasicConfig, TestShadowModeConfig,
// TestWildcardConfig; README examples 3, 4 and 7).
func TestEnvoyCorpusMatching(t *testing.T) {
	tests := []struct {
		file string
		d    policy.Descriptor
		want string
	}{
		{"basic_config.yaml", desc("key1", "value1", "subkey1", "something"), "5/1s"},
		{"basic_config.yaml", desc("key1", "value1", "subkey1", "subvalue1"), "10/1s"},
		{"basic_config.yaml", desc("key1", "value1"), "none"},
		{"basic_config.yaml", desc("key1", "value2", "subkey1", "something"), "none"},
		{"basic_config.yaml", desc("key2", "something"), "20/1m0s"},
		{"basic_config.yaml", desc("key2", "value2"), "30/1m0s"},
		{"basic_config.yaml", desc("key2", "value3"), "none"},
		{"basic_config.yaml", desc("key2", "value2", "subkey", "subvalue"), "none"},
		{"basic_config.yaml", desc("key3", "foo"), "1/1h0m0s"},
		{"basic_config.yaml", desc("key4", "foo"), "key4_rate_limit:1/24h0m0s"},
		{"basic_config.yaml", desc("key5", "value5"), "15/24h0m0s"},
		{"basic_config.yaml", desc("key5", "value5", "subkey5", "subvalue5"), "25/24h0m0s"},
		{"basic_config.yaml", desc("key6", "foo"), "unlimited"},
		{"basic_config.yaml", desc("key7", "unspecified"), "70/1m0s"},

		{"shadowmode_config.yaml", desc("key1", "value1", "subkey1", "something"), "5/1s"},
		{"shadowmode_config.yaml", desc("key1", "value1", "subkey1", "subvalue1"), "10/1s shadow"},
		{"shadowmode_config.yaml", desc("key2", "something"), "20/1m0s shadow"},
		{"shadowmode_config.yaml", desc("key2", "value2"), "30/1m0s"},

		{"wildcard.yaml", desc("wild", "foo1"), "20/1m0s"},
		{"wildcard.yaml", desc("wild", "foo"), "20/1m0s"},
		{"wildcard.yaml", desc("wild", "bar"), "none"},
		{"wildcard.yaml", desc("noWild", "foo1"), "none"},
		{"wildcard.yaml", desc("noWild", "foo"), "20/1m0s"},
		{"wildcard.yaml", desc("noVal", "foo1"), "20/1m0s"},
		{"wildcard.yaml", desc("midWild", "barab"), "20/1m0s"},
		{"wildcard.yaml", desc("midWild", "barac"), "none"},
		{"wildcard.yaml", desc("midWild", "bar*b"), "20/1m0s"},
		{"wildcard.yaml", desc("multiWild", "foo1bar2baz"), "10/1m0s"},
		{"wildcard.yaml", desc("multiWild", "foo1baz2bar"), "none"},
		{"wildcard.yaml", desc("nestedWild", "val1", "wild", "goo2"), "20/1m0s"},
		{"wildcard.yaml", desc("nestedWild", "val1", "wild", "foo2"), "none"},

		{"example_config.yaml", desc("database", "users"), "500/1s"},
		{"example_config.yaml", desc("database", "other"), "none"},

		{"example_example.yaml", desc("foo", "x"), "2/1m0s"},
		{"example_example.yaml", desc("foo", "x", "bar", "y"), "3/1m0s"},
		{"example_example.yaml", desc("foo", "x", "bar", "banned"), "banned_limit:0/1m0s deny"},
		{"example_example.yaml", desc("foo", "x", "baz", "shady"), "3/1m0s shadow"},
		{"example_example.yaml", desc("foo", "x", "bay", "y"), "unlimited"},
		{"example_example.yaml", desc("service", "service_1"), "1/1m0s quota"},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.d.String(), func(t *testing.T) {
			set := loadCorpusFile(t, tt.file)
			domain := set.Domains()[0]
			rules, ok := set.Match(domain, tt.d)
			if got := summary(rules, ok); got != tt.want {
				t.Errorf("Match(%s) = %s, want %s", tt.d, got, tt.want)
			}
		})
	}
}

// Replaces in Envoy's example: a matched "bkthomps" replacement drops the
// limit named bkthomps, whatever descriptor it came from.
func TestEnvoyCorpusReplaces(t *testing.T) {
	set := loadCorpusFile(t, "example_example.yaml")
	got := set.MatchAll("rl", []policy.Descriptor{
		desc("foo", "x", "bar", "bkthomps"),
		desc("source_cluster", "proxy", "destination_cluster", "bkthomps"),
	})
	if len(got[0]) != 0 || summary(got[1], true) != "2/1m0s" {
		t.Errorf("got %s and %s, want the bkthomps limit replaced and 2/1m0s", summary(got[0], true), summary(got[1], true))
	}
	got = set.MatchAll("rl", []policy.Descriptor{desc("foo", "x", "bar", "bkthomps")})
	if summary(got[0], true) != "bkthomps:1/1m0s" {
		t.Errorf("alone: %s, want bkthomps:1/1m0s", summary(got[0], true))
	}
}
