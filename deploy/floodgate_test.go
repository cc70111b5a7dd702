package deploy

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

// The binary the tests run, built once by TestMain the way a release is:
// static, trimmed, its version and commit stamped with -ldflags.
var floodgateBin string

const (
	stampVersion = "v9.9.9-deploytest"
	stampCommit  = "0123456789abcdef0123456789abcdef01234567"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "floodgate-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	floodgateBin, err = buildFloodgate(dir)
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "building floodgate:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildFloodgate builds ./cmd/floodgate as the Dockerfile does (CGO off,
// -trimpath, the cmd module on its own, version and commit by -ldflags).
func buildFloodgate(dir string) (string, error) {
	bin := filepath.Join(dir, "floodgate")
	pkg := "github.com/floodgate-io/floodgate/cmd/internal/cli"
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-X "+pkg+".Version="+stampVersion+" -X "+pkg+".Commit="+stampCommit,
		"-o", bin, "./floodgate")
	cmd.Dir = filepath.Join("..", "cmd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
}

func TestReleaseBuildSaysItsVersionAndCommit(t *testing.T) {
	out, err := exec.Command(floodgateBin, "version").Output()
	if err != nil {
		t.Fatalf("floodgate version: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	if lines[0] != "floodgate "+stampVersion {
		t.Errorf("first line %q, want %q", lines[0], "floodgate "+stampVersion)
	}
	if !strings.Contains(string(out), "commit:   "+stampCommit+"\n") {
		t.Errorf("version output does not name commit %s:\n%s", stampCommit, out)
	}
}

// startServe runs `floodgate serve` on ports the system picks and returns
// the addresses it logged; the process is stopped with the test.
func startServe(t *testing.T, args ...string) testkit.Serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args = append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--log-format", "json", "--shutdown-delay", "0"}, args...)
	cmd := exec.CommandContext(ctx, floodgateBin, args...)
	cmd.Env = []string{} // no FLOODGATE_ variable of the caller's
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	s, err := testkit.ReadServing(stderr)
	if err != nil {
		t.Fatalf("floodgate %s: %v", strings.Join(args, " "), err)
	}
	go io.Copy(io.Discard, stderr)
	return s
}

// waitTimeout bounds a test's calls to the service: generous, only so that
// a wedged service fails the test instead of hanging it.
const waitTimeout = 30 * time.Second
