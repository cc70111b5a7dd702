//go:build !race

package cli

// raceEnabled says the tests run under the race detector, which slows
// them: a test that sends many requests sends fewer.
const raceEnabled = false
