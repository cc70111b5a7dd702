package cli

import (
	"bytes"
	"cmp"
	"strings"
	"testing"
)

// --log-level drops the records below it; info is the default, and the
// flag shows the name it was given.
func TestLogLevel(t *testing.T) {
	tests := []struct {
		level string // "" is the default
		want  string // the levels of the records written, of debug, info, warn, error
	}{
		{"", "INFO WARN ERROR"},
		{"debug", "DEBUG INFO WARN ERROR"},
		{"info", "INFO WARN ERROR"},
		{"warn", "WARN ERROR"},
		{"error", "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var l logLevel
			if tt.level != "" {
				if err := l.Set(tt.level); err != nil {
					t.Fatal(err)
				}
			}
			if want := cmp.Or(tt.level, "info"); l.String() != want {
				t.Errorf("String = %q, want %q", l.String(), want)
			}
			var buf bytes.Buffer
			log, err := newLogger(&buf, "json", l)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d")
			log.Info("i")
			log.Warn("w")
			log.Error("e")
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if _, rest, ok := strings.Cut(line, `"level":"`); ok {
					got = append(got, rest[:strings.IndexByte(rest, '"')])
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("records at %s; want %s", strings.Join(got, " "), tt.want)
			}
		})
	}
}

// A level outside the four is refused with the accepted names: a typo
// never silently becomes another level.
func TestLogLevelRefused(t *testing.T) {
	for _, bad := range []string{"", "Info", "warning", "trace", "fatal", "info+2", "-4"} {
		var l logLevel
		err := l.Set(bad)
		if err == nil || !strings.Contains(err.Error(), "want debug, info, warn, error") || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("Set(%q) = %v, want an error naming it and the accepted levels", bad, err)
		}
	}
}
