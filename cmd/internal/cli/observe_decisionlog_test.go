package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// decisionLogOf runs serve with the shop policy and args, sends mallory
// six requests (the sixth is denied) and stops serve, and returns the
// records of the decision log file it wrote: what a SIEM reads once serve
// has stopped, so the file must have been flushed.
func decisionLogOf(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	file := filepath.Join(t.TempDir(), "decisions.jsonl")
	args = append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
		"--config", writePolicy(t, shopPolicy), "--decision-log", file}, args...)
	m, _, stop := startStoppable(t, listening, args)
	clearOfWindowEdge(t, time.Hour)
	for i := range 6 {
		if code, _ := allow(t, m[1], shopRequest("mallory")); code != 200 && i < 5 || code != 429 && i == 5 {
			t.Fatalf("mallory's request %d: %d", i, code)
		}
	}
	stop()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("mallory")) && !strings.Contains(strings.Join(args, " "), "raw") {
		t.Errorf("the decision log holds the raw key:\n%s", data)
	}
	var records []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a line of the decision log is not JSON: %v: %q", err, sc.Text())
		}
		records = append(records, r)
	}
	return records
}

// plainKeyHash is a key_hash without a secret: the first 16 hex digits of
// the key's SHA-256, which anyone can compute.
func plainKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:16]
}

// serve --decision-log writes one JSON line per denied request, with the
// documented fields (observe/decisionlog), the key hashed unless
// --decision-log-keys raw, and with a secret when
// --decision-log-secret-file gives one.
func TestServeDecisionLog(t *testing.T) {
	const key = "shop/user=mallory"
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("a secret of this deployment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		// key checks the record's key fields.
		key  func(r map[string]any) bool
		want string
	}{
		{"hashed", nil, func(r map[string]any) bool { return r["key_hash"] == plainKeyHash(key) && r["key"] == nil },
			"key_hash " + plainKeyHash(key) + " and no key"},
		{"raw", []string{"--decision-log-keys", "raw"}, func(r map[string]any) bool { return r["key"] == key && r["key_hash"] == nil },
			"key " + key + " and no key_hash"},
		{"with a secret", []string{"--decision-log-secret-file", secret}, func(r map[string]any) bool {
			h, _ := r["key_hash"].(string)
			return len(h) == 16 && h != plainKeyHash(key) && r["key"] == nil
		}, "a key_hash of 16 hex digits other than the plain SHA-256 one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records := decisionLogOf(t, tc.args...)
			if len(records) != 1 {
				t.Fatalf("%d records, want 1 (the denied request): %v", len(records), records)
			}
			r := records[0]
			for field, want := range map[string]any{"msg": "floodgate decision", "surface": "serve", "policy": "shop", "limit": "per-user",
				"result": "denied", "remaining": 0.0, "quota": 5.0, "cost": 1.0, "degraded": false} {
				if r[field] != want {
					t.Errorf("%s: %v, want %v (record %v)", field, r[field], want, r)
				}
			}
			for _, field := range []string{"time", "client", "retry_after_ms", "retry_after", "reset_after_ms", "latency_us"} {
				if _, ok := r[field]; !ok {
					t.Errorf("no %s in %v", field, r)
				}
			}
			if ms, _ := r["retry_after_ms"].(float64); ms <= 0 || ms > float64(time.Hour.Milliseconds()) {
				t.Errorf("retry_after_ms %v: want the rest of the hour's window", r["retry_after_ms"])
			}
			if !tc.key(r) {
				t.Errorf("keys: %v, want %s", r, tc.want)
			}
		})
	}
}

// Bad observability flags stop serve at its start, naming the flag.
func TestServeRefusesBadObserveFlags(t *testing.T) {
	short, long := filepath.Join(t.TempDir(), "short"), filepath.Join(t.TempDir(), "long")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(long, []byte("a secret of this deployment"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--near-limit-ratio", "0"}, "--near-limit-ratio"},
		{[]string{"--near-limit-ratio", "1.5"}, "--near-limit-ratio"},
		{[]string{"--decision-log-sample", "0.5"}, "--decision-log-sample needs --decision-log"},
		{[]string{"--decision-log-secret-file", short}, "--decision-log-secret-file needs --decision-log"},
		{[]string{"--decision-log", log, "--decision-log-sample", "2"}, "--decision-log-sample"},
		{[]string{"--decision-log", log, "--decision-log-sample", "-0.1"}, "--decision-log-sample"},
		{[]string{"--decision-log", log, "--decision-log-keys", "foo"}, "--decision-log-keys"},
		{[]string{"--decision-log", log, "--decision-log-rate", "-1"}, "--decision-log-rate"},
		{[]string{"--decision-log", log, "--decision-log-secret-file", short}, "--decision-log-secret-file"},
		{[]string{"--decision-log", log, "--decision-log-secret-file", filepath.Join(t.TempDir(), "none")}, "--decision-log-secret-file"},
		{[]string{"--decision-log", log, "--decision-log-keys", "raw", "--decision-log-secret-file", long}, "--decision-log-keys"},
		{[]string{"--decision-log", filepath.Join(t.TempDir(), "no", "such", "dir", "log")}, "--decision-log"},
		{[]string{"--decision-log", log, "--decision-log-rate", "0"}, "--decision-log-rate 0"},
		{[]string{"--top-k", "0"}, "--top-k 0"},
		{[]string{"--top-k", "100000"}, "--top-k"},
		{[]string{"--top-window", "0s"}, "--top-window 0s"},
		{[]string{"--top-window", "1ms"}, "--top-window"},
		{[]string{"--otlp-endpoint", "collector:4318"}, "--otlp-endpoint"},
		{[]string{"--observe-full-rate", "-1"}, "--observe-full-rate -1"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, tc.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}
