package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
)

// The bound reaches a running serve: with --max-keys 64, a key of a 1/h
// limit is forgotten once 200 other keys came after it, so it passes again
// (unbounded, it would still be denied).
func TestServeMaxKeysForgetsTheOldest(t *testing.T) {
	httpAddr, _, _ := startServe(t, "--max-keys", "64")
	body := func(key string) string {
		return `{"key":"` + key + `","limit":{"algorithm":"fixed_window","rate":1,"period":"1h"}}`
	}
	if code, out := allow(t, httpAddr, body("first")); code != 200 || out["allowed"] != true {
		t.Fatalf("first: %d %v", code, out)
	}
	if code, out := allow(t, httpAddr, body("first")); code != 429 || out["allowed"] != false {
		t.Fatalf("first again, remembered: %d %v", code, out)
	}
	for i := range 200 {
		allow(t, httpAddr, body(fmt.Sprint("other", i)))
	}
	if code, out := allow(t, httpAddr, body("first")); code != 200 || out["allowed"] != true {
		t.Fatalf("first after 200 others, forgotten under --max-keys 64: %d %v", code, out)
	}
}

func TestNegativeMaxKeysIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--max-keys", "-1"},
		{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--max-keys", "-1"},
	} {
		var errOut bytes.Buffer
		code := Main(context.Background(), args, io.Discard, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "--max-keys -1: want 0 (unbounded) or a positive number") {
			t.Errorf("%s: exit %d, stderr %q; want an error naming --max-keys", args[0], code, errOut.String())
		}
	}
}
