package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Error is a problem in a configuration file. Every error this package
// returns is an *Error or, from LoadFiles, several joined with errors.Join;
// errors.As finds it.
type Error struct {
	File string // the name given to Parse, or the path LoadFiles read
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

// yamlLine matches the "yaml: line N: problem" errors of the YAML library.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserErrors are how the errors of the YAML library's parser begin.
var parserErrors = []string{
	"did not find expected", "found undefined tag handle", "found duplicate %", "found incompatible YAML document",
}

// syntaxError turns an error of the YAML library into an *Error.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			// The library counts the lines of its parser's errors (as
			// opposed to its scanner's) from 0.
			for _, p := range parserErrors {
				if strings.HasPrefix(m[2], p) {
					line++
					break
				}
			}
			return &Error{File: file, Line: line, Msg: "invalid YAML: " + m[2]}
		}
	}
	return &Error{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}
