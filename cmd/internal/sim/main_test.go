package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a run leaves a process goroutine behind:
// every simulated call must be answered before Run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
