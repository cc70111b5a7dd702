//go:build race

package testkit

// RaceEnabled says the tests run under the race detector. It slows them,
// and its sync.Pool drops a share of what is put back at random, so that
// counts of allocations vary from run to run.
const RaceEnabled = true
