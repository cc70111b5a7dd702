package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/cmd/internal/watch"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// dayPolicy limits each user of domain api to n requests a day.
func dayPolicy(n string) string {
	return "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: " + n + "}\n"
}

const annRequest = `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A configuration that holds no policy stops serve, proxy and config check
// with an error naming the path, before anything listens; serve and proxy
// start on one only with --allow-empty-config (or its variable).
func TestConfigWithoutAPolicyIsRefused(t *testing.T) {
	empty, noYAML := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(noYAML, "serve.log"), "level=INFO\n")
	writeFile(t, filepath.Join(noYAML, "policy.json"), "{}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--config", empty}, empty + ": no policy: no *.yaml or *.yml file to load (--allow-empty-config runs without one)"},
		{[]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--config", noYAML}, noYAML + ": no policy"},
		{[]string{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--config", empty}, empty + ": no policy"},
		{[]string{"config", "check", empty}, empty + ": no policy: no *.yaml or *.yml file to load"},
		{[]string{"config", "check", noYAML}, noYAML + ": no policy"},
	} {
		// Patience bounds the run of a command that starts anyway.
		ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
		var out, errOut bytes.Buffer
		code := Main(ctx, tc.args, &out, &errOut)
		cancel()
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	t.Run("serve --allow-empty-config", func(t *testing.T) {
		_, _, logs := startServe(t, "--config", empty, "--allow-empty-config")
		if !strings.Contains(logs.String(), "domains=[]") {
			t.Errorf("started without saying it has no domain:\n%s", logs)
		}
	})
	t.Run("FLOODGATE_ALLOW_EMPTY_CONFIG", func(t *testing.T) {
		t.Setenv("FLOODGATE_ALLOW_EMPTY_CONFIG", "true")
		startServe(t, "--config", empty)
	})
	t.Run("proxy --allow-empty-config", func(t *testing.T) {
		startProxy(t, "--config", empty, "--allow-empty-config")
	})
}

// The policy in force outlives its files: deleting the only file is a
// failed reload and the limit still holds; a change that drops a limit is
// held back until the operator asks for it (POST /admin/reload).
func TestServeKeepsItsPolicyWhenTheFilesGo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	writeFile(t, file, dayPolicy("1"))
	httpAddr, _, logs := startServe(t, "--config", dir, "--admin-token", "tok")
	clearOfWindowEdge(t, 24*time.Hour)
	allow(t, httpAddr, annRequest)
	denied := func(when string) {
		t.Helper()
		if code, body := allow(t, httpAddr, annRequest); code != 429 {
			t.Fatalf("%s: %d %v, want 429: the limit of 1 a day is still in force; logs:\n%s", when, code, body, logs)
		}
	}
	denied("before any change")

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(logs.String(), "no policy: no *.yaml or *.yml file") }, "the emptied directory to be refused")
	denied("after the only file was deleted")

	writeFile(t, file, "domain: api\ndescriptors:\n  - key: ip\n    rate_limit: {unit: day, requests_per_unit: 1}\n")
	waitFor(t, func() bool { return strings.Contains(logs.String(), "config change held back") }, "the change that drops api.user to be held back")
	if !strings.Contains(logs.String(), "dropped_limits=[api.user]") {
		t.Errorf("the held-back change does not name the limit it drops:\n%s", logs)
	}
	denied("after a change that drops the limit")

	req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/admin/reload", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(logs.String(), `msg="config reloaded" domains=[api] routes=0 dropped_domains=[] dropped_limits=[api.user]`) {
		t.Fatalf("POST /admin/reload: %d; logs:\n%s", resp.StatusCode, logs)
	}
}

// A log written next to the policy file reloads nothing, and a deleted
// policy file fails one reload, not one per burst of log lines. The log is
// written in bursts watch.Settle apart, as a busy service writes it; each
// burst reloaded the policy before the watcher compared the files.
func TestServeIgnoresALogNextToItsPolicy(t *testing.T) {
	dir := t.TempDir()
	file, logFile := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "serve.log")
	writeFile(t, file, dayPolicy("1"))
	_, _, logs := startServe(t, "--config", file)
	appendLog := func() {
		for range 5 {
			f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("level=INFO msg=\"a request\"\n")
			f.Close()
			time.Sleep(2 * watch.Settle) // a burst of its own
		}
	}
	count := func(s string) int { return strings.Count(logs.String(), s) }

	appendLog()
	writeFile(t, file, dayPolicy("2"))
	waitFor(t, func() bool { return count("config reloaded") > 0 }, "the edit to be reloaded")
	// A slow write may be seen half done, then done: two reloads at most.
	if n := count("config reloaded"); n > 2 {
		t.Errorf("%d reloads for one edit and a log written next to the file; logs:\n%s", n, logs)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return count("config reload failed") > 0 }, "the deleted file to fail a reload")
	appendLog()
	writeFile(t, file, dayPolicy("3"))
	reloads := count("config reloaded")
	waitFor(t, func() bool { return count("config reloaded") > reloads }, "the file put back to be reloaded")
	if n := count("config reload failed"); n != 1 {
		t.Errorf("%d failed reloads while the file was gone, want 1; logs:\n%s", n, logs)
	}
}

// serve follows a mounted Kubernetes ConfigMap: the kubelet swaps a
// symbolic link, and the files are links through it.
func TestServeFollowsAConfigMapSwap(t *testing.T) {
	cm := servicetest.NewConfigMap(t, map[string]string{"p.yaml": dayPolicy("1")})
	httpAddr, _, _ := startServe(t, "--config", cm.Dir)
	clearOfWindowEdge(t, 24*time.Hour)
	allow(t, httpAddr, annRequest)
	if code, _ := allow(t, httpAddr, annRequest); code != 429 {
		t.Fatalf("limit 1: second request %d", code)
	}
	cm.Update(map[string]string{"p.yaml": dayPolicy("5")})
	waitFor(t, func() bool { code, _ := allow(t, httpAddr, annRequest); return code == 200 }, "the swapped-in limit to apply")
}
