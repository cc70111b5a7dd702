package watch

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestABurstOfWritesIsOneChange(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	os.WriteFile(file, []byte("a"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var changes atomic.Int32
	if err := Watch(ctx, []string{file}, func() { changes.Add(1) }); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		os.WriteFile(file, []byte{byte('b' + i)}, 0o644)
	}
	deadline := time.Now().Add(5 * time.Second)
	for changes.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * Settle)
	if n := changes.Load(); n != 1 {
		t.Fatalf("%d changes reported for one burst, want 1", n)
	}
	// A rename over the file (how editors save) is seen too.
	tmp := filepath.Join(dir, ".policy.yaml.tmp")
	os.WriteFile(tmp, []byte("z"), 0o644)
	os.Rename(tmp, file)
	deadline = time.Now().Add(5 * time.Second)
	for changes.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := changes.Load(); n != 2 {
		t.Fatalf("a rename over the file: %d changes, want 2", n)
	}
}

func TestMissingPathIsAnError(t *testing.T) {
	if err := Watch(context.Background(), []string{"/nonexistent/floodgate/policy.yaml"}, func() {}); err == nil {
		t.Fatal("watching a missing directory succeeded")
	}
}
