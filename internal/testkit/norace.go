//go:build !race

package testkit

// RaceEnabled says the tests run under the race detector (see race.go).
const RaceEnabled = false
