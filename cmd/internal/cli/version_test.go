package cli

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

// A binary reports what its build info holds, and a release's -ldflags
// values win over it: the version and commit a container build (no .git)
// cannot read from the repository.
func TestReadStamp(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "4e6804a1b2c3d4e5f60718293a4b5c6d7e8f9012"},
		{Key: "vcs.time", Value: "2026-05-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/floodgate-io/floodgate/cmd", Version: "v1.2.3"}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/floodgate-io/floodgate/cmd", Version: "(devel)"}, Settings: vcs}
	tests := []struct {
		name            string
		info            *debug.BuildInfo
		version, commit string
		want            stamp
	}{
		{"module version from a tagged build", tagged, "", "",
			stamp{Version: "v1.2.3", Module: "github.com/floodgate-io/floodgate/cmd", Revision: "unknown", Time: "unknown", Go: "go1.26.0"}},
		{"a checkout's build: devel and its commit", devel, "", "",
			stamp{Version: "devel", Module: "github.com/floodgate-io/floodgate/cmd", Revision: "4e6804a1b2c3d4e5f60718293a4b5c6d7e8f9012", Time: "2026-05-01T10:00:00Z", Modified: true, Go: "go1.26.0"}},
		{"-ldflags win over the build info", devel, "v2.0.0", "abc123", stamp{Version: "v2.0.0", Module: "github.com/floodgate-io/floodgate/cmd", Revision: "abc123", Time: "2026-05-01T10:00:00Z", Modified: true, Go: "go1.26.0"}},
		{"no build info at all", nil, "", "", stamp{Version: "devel", Module: "unknown", Revision: "unknown", Time: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readStamp(tt.info, tt.version, tt.commit)
			if tt.info == nil {
				tt.want.Go = got.Go // the running toolchain's, whatever it is
			}
			if got != tt.want {
				t.Fatalf("readStamp = %+v\nwant       %+v", got, tt.want)
			}
		})
	}
}

func TestVersionCommandPrintsEveryFact(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	prefixes := []string{"floodgate ", "module:", "commit:", "time:", "modified:", "go:"}
	if len(lines) != len(prefixes) {
		t.Fatalf("version printed %d lines, want %d (%v):\n%s", len(lines), len(prefixes), prefixes, out.String())
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], p)
		}
	}
}
