package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
)

// writeFiles creates files (name -> content) under a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Paths that hold no policy are an error naming them, never an empty Set
// that would enforce nothing; ErrNoPolicy tells this case apart from a
// broken file.
func TestLoadFilesWithoutAPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		noPolicy bool   // the error wraps ErrNoPolicy
		want     string // in the error, after the directory's path
	}{
		{"an empty directory", nil, true, ": no policy: no *.yaml or *.yml file to load"},
		{"no yaml file", map[string]string{"notes.txt": "domain: api\n", "serve.log": "x"}, true, ": no policy"},
		{"only hidden and nested files", map[string]string{".p.yaml": "domain: api\n", "sub/p.yaml": "domain: api\n"}, true, ": no policy"},
		{"a file without a domain", map[string]string{"p.yaml": "descriptors: []\n"}, false, "domain is required"},
		{"a file of comments", map[string]string{"p.yaml": "# nothing yet\n"}, false, "empty file"},
		{"an empty file", map[string]string{"p.yaml": ""}, false, "empty file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			set, err := config.LoadFiles(dir)
			if err == nil {
				t.Fatalf("loaded domains %v, want an error", set.Domains())
			}
			if got := errors.Is(err, config.ErrNoPolicy); got != tc.noPolicy {
				t.Errorf("errors.Is(%v, ErrNoPolicy) = %v, want %v", err, got, tc.noPolicy)
			}
			if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to name %s and say %q", err, dir, tc.want)
			}
		})
	}
	t.Run("one empty directory among others is no error", func(t *testing.T) {
		empty, full := t.TempDir(), writeFiles(t, map[string]string{"p.yaml": "domain: api\n"})
		if _, err := config.LoadFiles(empty, full); err != nil {
			t.Fatal(err)
		}
	})
}

// The digest of what was read changes with any byte of a policy file, a
// file added or removed, or where a symbolic link leads (a Kubernetes
// ConfigMap update), and with nothing else in the directory.
func TestFilesDigest(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": "domain: a\n", "v1/b.yaml": "domain: b\n", "v2/b.yaml": "domain: b\n"})
	link := filepath.Join(dir, "b.yaml")
	if err := os.Symlink(filepath.Join("v1", "b.yaml"), link); err != nil {
		t.Fatal(err)
	}
	digest := func() [32]byte { return config.ReadFiles(dir).Digest() }
	before := digest()
	for _, tc := range []struct {
		name    string
		change  func() error
		changes bool
	}{
		{"a log written next to the policy", func() error { return os.WriteFile(filepath.Join(dir, "serve.log"), []byte("x"), 0o644) }, false},
		{"a hidden file", func() error { return os.WriteFile(filepath.Join(dir, ".a.yaml.swp"), []byte("x"), 0o644) }, false},
		{"the same bytes written again", func() error { return os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\n"), 0o644) }, false},
		{"a byte of a policy", func() error { return os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: A\n"), 0o644) }, true},
		{"a link pointed elsewhere, same bytes", func() error {
			if err := os.Remove(link); err != nil {
				return err
			}
			return os.Symlink(filepath.Join("v2", "b.yaml"), link)
		}, true},
		{"a policy file added", func() error { return os.WriteFile(filepath.Join(dir, "c.yml"), []byte("domain: c\n"), 0o644) }, true},
		{"a policy file removed", func() error { return os.Remove(filepath.Join(dir, "c.yml")) }, true},
	} {
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		after := digest()
		if changed := after != before; changed != tc.changes {
			t.Errorf("%s: digest changed %v, want %v", tc.name, changed, tc.changes)
		}
		before = after
	}
	if got, want := config.ReadFiles(dir).Dirs(), []string{mustResolve(t, dir), mustResolve(t, filepath.Join(dir, "v2"))}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Dirs %v, want %v", got, want)
	}
}

func mustResolve(t *testing.T, path string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
