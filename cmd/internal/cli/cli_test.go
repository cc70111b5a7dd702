package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestVersionPrintsName(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "floodgate ") {
		t.Fatalf("version output %q does not start with %q", out.String(), "floodgate ")
	}
}

func TestUnknownCommandFails(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"no-such-command"}, &out, &errOut); code == 0 {
		t.Fatal("unknown command exited 0")
	}
	if !strings.Contains(errOut.String(), "no-such-command") {
		t.Fatalf("error %q does not name the unknown command", errOut.String())
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/good.yaml"
	bad := dir + "/bad.yaml"
	os.WriteFile(good, []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 5}\n"), 0o644)
	os.WriteFile(bad, []byte("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n"), 0o644)
	// a second file of the domain "api", joined to good.yaml only with --merge-domains
	more := dir + "/more.yaml"
	os.WriteFile(more, []byte("domain: api\ndescriptors:\n  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 9}\n"), 0o644)
	// a token bucket, which the leased and gossip strategies cannot share
	bucket := dir + "/bucket.yaml"
	os.WriteFile(bucket, []byte("domain: b\ndescriptors:\n  - key: user\n    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 5}\n"), 0o644)
	tests := []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"config", "check", good}, 0, `domain "api": 1 limits`},
		{[]string{"config", "check", bad}, 1, "bad.yaml:4"},
		{[]string{"config", "check", good, bad}, 1, "fortnight"},
		{[]string{"config", "check"}, 1, "requires at least 1 arg"},
		{[]string{"config", "check", good, more}, 1, `domain "api" is already defined in`},
		{[]string{"config", "check", "--merge-domains", good, more}, 0, `domain "api": 2 limits`},
		{[]string{"config", "check", bucket}, 0, `domain "b": 1 limits`},
		{[]string{"config", "check", "--strategy", "leased", good}, 0, `domain "api": 1 limits`},
		{[]string{"config", "check", "--strategy", "leased", bucket}, 1,
			"bucket.yaml:4: limit #0 (b.user) cannot be shared by strategy leased (--strategy): floodgate: invalid limit: the leased strategy serves fixed_window only"},
		{[]string{"config", "check", "--strategy", "telepathy", good}, 1, `--strategy "telepathy"`},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(out.String()+errOut.String(), tt.contains) {
			t.Errorf("%v: exit %d, output %q %q; want exit %d containing %q", tt.args, code, out.String(), errOut.String(), tt.code, tt.contains)
		}
	}
}

func TestBenchReportsBadFlagsByName(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"bench", "--concurrency", "-1"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--concurrency") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// bench keeps its collector's heap goal at a floor too (its own pauses
// would read as the service's latency); a bad floor is refused by name.
func TestBenchHeapFloorIsAFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"bench", "--gc-heap-floor-mib", "lots"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), `"lots" for "--gc-heap-floor-mib"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	code = Main(context.Background(), []string{"bench", "--help"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "--gc-heap-floor-mib int") || !strings.Contains(out.String(), "(default 128)") {
		t.Fatalf("exit %d, help %q", code, out.String())
	}
}

// A call log that cannot be written is refused before any call, by its
// flag's name.
func TestBenchCallLogMustBeWritable(t *testing.T) {
	var out, errOut bytes.Buffer
	path := filepath.Join(t.TempDir(), "no-such-dir", "calls.txt")
	code := Main(context.Background(), []string{"bench", "--addr", "127.0.0.1:1", "--requests", "1", "--call-log", path}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--call-log") || strings.Contains(errOut.String(), "calls failed") {
		t.Fatalf("exit %d, stderr %q; want --call-log refused before any call", code, errOut.String())
	}
}

func TestBenchAgainstNothingFails(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"bench", "--target", "http", "--addr", "127.0.0.1:1", "--requests", "5", "--duration", "2s", "--timeout", "200ms"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "calls failed") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// serve refuses at start-up a policy with a limit its strategy cannot
// share, naming the file and line, before it listens or asks for Redis.
func TestServeRefusesALimitItsStrategyCannotServe(t *testing.T) {
	bucket := t.TempDir() + "/bucket.yaml"
	os.WriteFile(bucket, []byte("domain: b\ndescriptors:\n  - key: user\n    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 5}\n"), 0o644)
	for _, strategy := range []string{"leased", "gossip"} {
		var out, errOut bytes.Buffer
		// Were the policy accepted, serve would run until this ends.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code := Main(ctx, []string{"serve", "--config", bucket, "--strategy", strategy,
			"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--cluster-bind", "127.0.0.1:0"}, &out, &errOut)
		want := "bucket.yaml:4: limit #0 (b.user) cannot be shared by strategy " + strategy
		if code != 1 || !strings.Contains(errOut.String(), want) {
			t.Errorf("serve --strategy %s: exit %d, stderr %q; want exit 1 naming %q", strategy, code, errOut.String(), want)
		}
	}
}

// bench's defaults ask for a limit of serve's built-in policy, and a run
// whose lookup matched no limit says so: its calls were all allowed
// because nothing counted them.
func TestBenchWarnsWhenNoLimitMatched(t *testing.T) {
	httpAddr, grpcAddr, _ := startServe(t)
	const warning = "warning: no limit matched"
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--target", "grpc", "--addr", grpcAddr}, false},
		{[]string{"--target", "http", "--addr", httpAddr}, false},
		{[]string{"--target", "grpc", "--addr", grpcAddr, "--domain", "bench"}, true},
		{[]string{"--target", "http", "--addr", httpAddr, "--descriptor-key", "tenant"}, true},
		{[]string{"--target", "http", "--addr", httpAddr, "--domain", "bench", "--limit", "fixed_window:10/1s"}, false},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"bench", "--requests", "1", "--concurrency", "1", "--keys", "1"}, tc.args...)
		code := Main(context.Background(), args, &out, &errOut)
		if code != 0 || !strings.Contains(out.String(), "allowed  1") || strings.Contains(errOut.String(), warning) != tc.warn {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0, one call allowed, and a warning %v", tc.args, code, out.String(), errOut.String(), tc.warn)
		}
	}
}

// Every command's --help ends with examples (cobra's Example field), but
// cobra's own help and completion commands.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example for its --help", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRoot())
}
