package cli

import (
	"fmt"
	"log/slog"
	"strings"
)

// logLevel is --log-level: the least severe level logged. Its zero value
// is info, the default.
type logLevel slog.Level

// logLevels are the names --log-level takes, in order of severity.
var logLevels = []struct {
	name  string
	level slog.Level
}{{"debug", slog.LevelDebug}, {"info", slog.LevelInfo}, {"warn", slog.LevelWarn}, {"error", slog.LevelError}}

// Set refuses any name but the four, so that a typo fails at start rather
// than logging at a level nobody chose.
func (l *logLevel) Set(s string) error {
	for _, n := range logLevels {
		if s == n.name {
			*l = logLevel(n.level)
			return nil
		}
	}
	names := make([]string, len(logLevels))
	for i, n := range logLevels {
		names[i] = n.name
	}
	return fmt.Errorf("log level %q: want %s", s, strings.Join(names, ", "))
}

func (l *logLevel) String() string {
	for _, n := range logLevels {
		if slog.Level(*l) == n.level {
			return n.name
		}
	}
	return slog.Level(*l).String()
}

func (l *logLevel) Type() string { return "level" }
