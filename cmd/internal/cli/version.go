package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version and Commit name a release build. A build from a git checkout
// needs neither (the go command stamps the module version and the commit
// into the binary), but a build without the repository's .git (a container
// build whose context leaves it out) knows them only if the release sets
// them:
//
//	go build -ldflags "-X github.com/floodgate-io/floodgate/cmd/internal/cli.Version=v1.2.3 \
//	  -X github.com/floodgate-io/floodgate/cmd/internal/cli.Commit=$(git rev-parse HEAD)" ./cmd/floodgate
//
// Set, they win over the build info.
var (
	Version = ""
	Commit  = ""
)

// stamp is what a binary knows of its own build.
type stamp struct {
	Version  string // the release or module version; "devel" for an untagged build
	Module   string // the main module's path
	Revision string // the VCS commit, or "unknown"
	Time     string // the commit's time (RFC 3339), or "unknown"
	Modified bool   // the working tree had uncommitted changes
	Go       string // the toolchain that built it
}

// readStamp derives the stamp from the build info (nil when the binary
// has none) and the -ldflags overrides.
func readStamp(info *debug.BuildInfo, version, commit string) stamp {
	s := stamp{Version: "devel", Module: "unknown", Revision: "unknown", Time: "unknown", Go: runtime.Version()}
	if info != nil {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			s.Version = v
		}
		if info.Main.Path != "" {
			s.Module = info.Main.Path
		}
		if info.GoVersion != "" {
			s.Go = info.GoVersion
		}
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				s.Revision = kv.Value
			case "vcs.time":
				s.Time = kv.Value
			case "vcs.modified":
				s.Modified = kv.Value == "true"
			}
		}
	}
	if version != "" {
		s.Version = version
	}
	if commit != "" {
		s.Revision = commit
	}
	return s
}

// write prints the stamp: the version alone on the first line, for
// scripts, then one "name: value" line per fact.
func (s stamp) write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "floodgate %s\nmodule:   %s\ncommit:   %s\ntime:     %s\nmodified: %t\ngo:       %s %s/%s\n",
		s.Version, s.Module, s.Revision, s.Time, s.Modified, s.Go, runtime.GOOS, runtime.GOARCH)
	return err
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the Floodgate version, its commit and the toolchain that built it",
		Long: "Prints the release or module version on the first line, then the commit, its time,\n" +
			"whether the working tree was modified, and the Go toolchain, from the binary's build info\n" +
			"(or from -ldflags -X ...cli.Version / ...cli.Commit when a release sets them).",
		Example: "  floodgate version\n  floodgate version | head -1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			return readStamp(info, Version, Commit).write(cmd.OutOrStdout())
		},
	}
}

// versionString is the binary's version as GET /admin/status shows it.
func versionString() string {
	info, _ := debug.ReadBuildInfo()
	return readStamp(info, Version, Commit).Version
}
