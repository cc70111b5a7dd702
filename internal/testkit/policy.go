package testkit

import (
	"bytes"
	"sync"
	"testing"

	"github.com/floodgate-io/floodgate/config"
)

// Policies parses one inline YAML policy into a set, failing the test on
// any error.
func Policies(tb testing.TB, yaml string) *config.Set {
	tb.Helper()
	p, err := config.Parse("policy.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	set, err := config.NewSet(p)
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// SyncBuffer is a log destination safe for concurrent writes and reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
