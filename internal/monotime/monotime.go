// Package monotime reads the time as microseconds since the Unix epoch
// from the monotonic clock: the wall clock is read once, at the start, and
// followed by the monotonic clock from then on, so that a step of the
// system's wall clock (NTP, an operator) can neither refill nor drain a
// bucket, and each read costs about half of time.Now (which reads both).
package monotime

import "time"

// Micros is a clock started by New. Its zero value is not usable.
type Micros struct {
	base   time.Time
	baseUS int64
}

// New starts a clock at the wall clock's time now.
func New() Micros {
	now := time.Now()
	return Micros{base: now, baseUS: now.UnixMicro()}
}

// Now is the time in microseconds since the Unix epoch.
func (m Micros) Now() int64 {
	return m.baseUS + int64(time.Since(m.base)/time.Microsecond)
}
