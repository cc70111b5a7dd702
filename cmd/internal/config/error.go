package config

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// Error is a problem in a configuration file, at file:line. Every error
// this package returns is an *Error or, from LoadFiles, several joined with
// errors.Join; errors.As finds it. It is policy.Error, which NewSet also
// returns for a domain defined twice.
type Error = policy.Error

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
