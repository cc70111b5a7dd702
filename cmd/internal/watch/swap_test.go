package watch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// realTempDir is t.TempDir with its own links resolved (macOS's /var is
// one), so that the links a test makes are the only ones on the way.
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	return dir
}

// swapLink points link at target the atomic way, as envoyproxy/ratelimit's
// runtime and the kubelet do: a new link, renamed over the old one.
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	must(t, os.Symlink(target, tmp))
	must(t, os.Rename(tmp, link))
}

// writeAll creates the files (path under root -> content) and their
// directories.
func writeAll(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

// linkDirs finds the directory of every link on the way to a path,
// through the links' targets too, and nothing for a path without links.
func TestLinkDirs(t *testing.T) {
	root := realTempDir(t)
	writeAll(t, root, map[string]string{
		"plain/config/p.yaml":                "",
		"runtime/v1/ratelimit/config/p.yaml": "",
		"cm/..2026_v1/config/p.yaml":         "",
		"far/real/p.yaml":                    "",
	})
	must(t, os.MkdirAll(filepath.Join(root, "near"), 0o755))
	for link, target := range map[string]string{
		"runtime/current": "v1",                           // RUNTIME_ROOT
		"cm/..data":       "..2026_v1",                    // a ConfigMap mount
		"cm/config":       "..data/config",                // its directory item
		"near/l":          filepath.Join(root, "far/hop"), // a chain across directories
		"far/hop":         "real",
		"loop":            "loop",
	} {
		must(t, os.Symlink(target, filepath.Join(root, link)))
	}
	tests := []struct {
		name, path string
		want       []string // under root
	}{
		{"no link", "plain/config", nil},
		{"RUNTIME_ROOT swapped", "runtime/current/ratelimit/config", []string{"runtime"}},
		{"a file under it", "runtime/current/ratelimit/config/p.yaml", []string{"runtime"}},
		{"a ConfigMap's directory", "cm/config", []string{"cm"}},
		{"a chain of links", "near/l/p.yaml", []string{"far", "near"}},
		{"a missing name: the links up to it", "runtime/current/missing/config", []string{"runtime"}},
		{"a loop ends", "loop/x", []string{"."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, w := range tt.want {
				want = append(want, filepath.Join(root, w))
			}
			if got := linkDirs([]string{filepath.Join(root, tt.path)}); !slices.Equal(got, want) {
				t.Errorf("linkDirs(%s) = %v, want %v", tt.path, got, want)
			}
		})
	}
}

// On real files through fsnotify: a swap of a link above the policy's
// directory is a change (envoyproxy/ratelimit's RUNTIME_ROOT, a ConfigMap
// holding the policy's directory), and so are an edit in the directory the
// link leads to now, and a second swap.
func TestWatchSeesASwapAboveThePolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		link     string // the link swapped, under root
		path     string // the --config given, under root
		versions []string
	}{
		{"RUNTIME_ROOT", "current", "current/ratelimit/config", []string{"v1", "v2", "v3"}},
		{"a ConfigMap's ..data", "..data", "config", []string{"..2026_v1", "..2026_v2", "..2026_v3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := realTempDir(t)
			sub := strings.TrimPrefix(tc.path, "current/")
			if tc.link == "..data" {
				must(t, os.Symlink("..data/config", filepath.Join(root, "config")))
			}
			version := func(i int) {
				writeAll(t, filepath.Join(root, tc.versions[i]), map[string]string{
					filepath.Join(sub, "p.yaml"): "domain: " + tc.versions[i] + "\n"})
			}
			version(0)
			must(t, os.Symlink(tc.versions[0], filepath.Join(root, tc.link)))

			// Each change reports the policy as it reads then: a change
			// counts once the policy reads as expected, so a late report of
			// an earlier burst cannot stand in for a later one.
			file := filepath.Join(root, tc.path, "p.yaml")
			changes := make(chan string, 100)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			must(t, Watch(ctx, []string{filepath.Join(root, tc.path)}, func() {
				data, _ := os.ReadFile(file)
				changes <- string(data)
			}))
			await := func(what, want string) {
				t.Helper()
				deadline := time.After(timing.Patience)
				for {
					select {
					case got := <-changes:
						if got == want {
							return
						}
					case <-deadline:
						t.Fatalf("%s: no change to %q reported within %v", what, want, timing.Patience)
					}
				}
			}

			version(1)
			swapLink(t, tc.versions[1], filepath.Join(root, tc.link))
			await("the first swap", "domain: "+tc.versions[1]+"\n")
			must(t, os.RemoveAll(filepath.Join(root, tc.versions[0]))) // as the kubelet does
			must(t, os.WriteFile(file, []byte("domain: edited\n"), 0o644))
			await("an edit in the directory the link leads to now", "domain: edited\n")
			version(2)
			swapLink(t, tc.versions[2], filepath.Join(root, tc.link))
			await("the second swap", "domain: "+tc.versions[2]+"\n")
		})
	}
}
