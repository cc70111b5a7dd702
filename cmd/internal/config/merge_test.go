package config_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
)

// mergeCases are the directories of testdata/merge: each holds the files
// of one configuration, and its name says the verdict with MergeDomains
// ("ok_..." or "error_..."). Without it each of them is an error, since
// each names a domain in two files.
func mergeCases(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "merge", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases in testdata/merge: %v", err)
	}
	return dirs
}

func TestMergeDomains(t *testing.T) {
	for _, dir := range mergeCases(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			files := config.ReadFiles(dir)
			if _, err := files.Parse(); err == nil {
				t.Errorf("without MergeDomains: loaded, want the domain named twice refused")
			}
			_, err := files.ParseWith(config.Options{MergeDomains: true})
			if wantOK := strings.HasPrefix(name, "ok_"); wantOK != (err == nil) {
				t.Fatalf("with MergeDomains: error %v, want ok=%v", err, wantOK)
			}
			if err != nil {
				var ce *config.Error
				if !errors.As(err, &ce) || ce.File == "" {
					t.Errorf("error %v is not a *config.Error naming a file", err)
				}
			}
		})
	}
}

// A merged domain matches the descriptors of all its files, and each limit
// keeps the file it was written in.
func TestMergeDomainsJoinsDescriptors(t *testing.T) {
	set, err := config.ReadFiles(filepath.Join("testdata", "merge", "ok_two_domains")).
		ParseWith(config.Options{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Domains(), ","); got != "search,shop" {
		t.Fatalf("domains %s, want search,shop", got)
	}
	shop, _ := set.Policy("shop")
	files := map[string]string{}
	for _, r := range shop.Rules() {
		files[r.Path] = filepath.Base(r.File)
	}
	want := map[string]string{"shop.user": "a.yaml", "shop.ip": "c.yaml"}
	if len(files) != len(want) {
		t.Fatalf("rules %v, want %v", files, want)
	}
	for path, file := range want {
		if files[path] != file {
			t.Errorf("rule %s from %q, want %q", path, files[path], file)
		}
	}
}

func TestMergeDomainsErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"a descriptor in two files", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: {unit: second, requests_per_unit: 2}\n",
		}, `b.yaml:1: domain "d": descriptor "k_v" is already defined in `},
		{"routes in two files", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 1}\nroutes:\n  - descriptors: [{ip: ip}]\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\nroutes:\n  - descriptors: [{user: \"header:x-user\"}]\n",
		}, "routes or trusted_proxies are already given in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.ReadFiles(writeFiles(t, tc.files)).ParseWith(config.Options{MergeDomains: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// The verdicts of testdata/merge are those of envoyproxy/ratelimit's
// ratelimit-check, with and without -merge_domain_configs, when
// FLOODGATE_ERL_CHECK_BIN names that binary (it is another project's, so
// the test skips without it).
func TestMergeDomainsAgreesWithRatelimitCheck(t *testing.T) {
	bin := os.Getenv("FLOODGATE_ERL_CHECK_BIN")
	if bin == "" {
		t.Skip("SKIPPED: set FLOODGATE_ERL_CHECK_BIN to envoyproxy/ratelimit's ratelimit-check to compare verdicts")
	}
	for _, dir := range mergeCases(t) {
		for _, merge := range []bool{false, true} {
			args := []string{"-config_dir", dir}
			if merge {
				args = append(args, "-merge_domain_configs")
			}
			out, theirErr := exec.Command(bin, args...).CombinedOutput()
			_, ourErr := config.ReadFiles(dir).ParseWith(config.Options{MergeDomains: merge})
			if (theirErr == nil) != (ourErr == nil) {
				t.Errorf("%s merge=%v: ratelimit-check ok=%v (%s), floodgate error %v",
					dir, merge, theirErr == nil, strings.TrimSpace(string(out)), ourErr)
			}
		}
	}
}
