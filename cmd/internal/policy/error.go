package policy

import "fmt"

// Error is a problem in a policy, located where it is written. The decoder
// (cmd/internal/config) reports every problem of a file as an *Error, and NewSet
// reports a domain defined twice as one, so a caller finds either with
// errors.As.
type Error struct {
	File string // the name the file was parsed under, usually its path
	Line int    // 1-based; 0 when the problem is the file as a whole
	Msg  string // the problem, with the descriptor it is in
	Err  error  // the cause, if any: floodgate.ErrInvalidLimit for a limit the engine refuses
}

// Error renders "file:line: msg", or "file: msg" without a line.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
