package servicetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// Policies parses one inline YAML policy into a set, failing the test on
// any error.
func Policies(tb testing.TB, yaml string) *policy.Set {
	tb.Helper()
	p, err := config.Parse("policy.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	set, err := policy.NewSet(p)
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

// APIPolicy is the example API that tests of the engine and the service
// share: a per-user window, a tenant with burst and sustained limits, an
// unlimited and a blocked path, and a shadow-mode limit. A test may append
// descriptors to it.
const APIPolicy = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    rate_limits:
      - {name: burst, algorithm: token_bucket, unit: second, requests_per_unit: 2, burst: 4}
      - {name: sustained, unit: minute, requests_per_unit: 5}
  - key: path
    value: /health
    rate_limit: {unlimited: true}
  - key: path
    value: /blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: beta
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// TokenLimits is an api_key descriptor, for a test to put in its policy's
// descriptors, with two limits per minute: rpm, which counts requests, and
// tpm, which counts units (tokens). Its rate_limits list comes last, so a
// test may append limits to it.
func TokenLimits(rpm, tpm int64) string {
	return fmt.Sprintf(`  - key: api_key
    rate_limits:
      - {name: rpm, counts: requests, unit: minute, requests_per_unit: %d}
      - {name: tpm, unit: minute, requests_per_unit: %d}
`, rpm, tpm)
}
