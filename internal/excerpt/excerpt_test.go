package excerpt_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/floodgate-io/floodgate/internal/excerpt"
	"pgregory.net/rapid"
)

func TestQuote(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"short is quoted whole", "user:42", `"user:42"`},
		{"exactly the limit", strings.Repeat("a", excerpt.Bytes), `"` + strings.Repeat("a", excerpt.Bytes) + `"`},
		{"long is cut and sized", strings.Repeat("a", 1_000_000), `"` + strings.Repeat("a", excerpt.Bytes) + `…" (1000000 bytes)`},
		{"cut on a character boundary", strings.Repeat("a", excerpt.Bytes-1) + "é" + "tail", `"` + strings.Repeat("a", excerpt.Bytes-1) + `…" (37 bytes)`},
		{"control bytes escaped", "a\x00b", `"a\x00b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := excerpt.Quote(c.in); got != c.want {
				t.Errorf("Quote(%d bytes) = %s, want %s", len(c.in), got, c.want)
			}
		})
	}
}

// TestQuoteBounded: whatever the input, the excerpt stays short and valid
// UTF-8 when the input's prefix is.
func TestQuoteBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s") + strings.Repeat("x", rapid.IntRange(0, 100_000).Draw(t, "pad"))
		got := excerpt.Quote(s)
		if len(got) > 4*excerpt.Bytes+32 {
			t.Fatalf("Quote of %d bytes is %d bytes long: %s", len(s), len(got), got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Quote gave invalid UTF-8: %q", got)
		}
	})
}

func TestMessage(t *testing.T) {
	short := strings.Repeat("m", excerpt.MessageBytes)
	if got := excerpt.Message(short); got != short {
		t.Fatalf("a message at the bound was changed: %q", got)
	}
	long := "unknown field " + strings.Repeat("é", 1<<20)
	got := excerpt.Message(long)
	if !utf8.ValidString(got) || len(got) > excerpt.MessageBytes+32 ||
		!strings.HasPrefix(got, "unknown field é") || !strings.HasSuffix(got, "… (2097166 bytes)") {
		t.Fatalf("Message of %d bytes = %d bytes %.80q…%q", len(long), len(got), got, got[max(0, len(got)-24):])
	}
}
