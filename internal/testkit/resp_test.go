package testkit

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		kind Kind
	}{
		{"simple", "+OK\r\n", "OK", Simple},
		{"error", "-ERR boom\r\n", "(error) ERR boom", Error},
		{"integer", ":-42\r\n", "-42", Integer},
		{"bulk", "$5\r\nhello\r\n", "hello", Bulk},
		{"bulk with CRLF inside", "$4\r\na\r\nb\r\n", "a\r\nb", Bulk},
		{"empty bulk", "$0\r\n\r\n", "", Bulk},
		{"nil bulk", "$-1\r\n", "(nil)", Nil},
		{"nil array", "*-1\r\n", "(nil)", Nil},
		{"empty array", "*0\r\n", "[]", Array},
		{"nested array", "*3\r\n:1\r\n*2\r\n+a\r\n$1\r\nb\r\n$-1\r\n", "[1 [a b] (nil)]", Array},
		{"error in array", "*1\r\n-MOVED 1 127.0.0.1:1\r\n", "[(error) MOVED 1 127.0.0.1:1]", Array},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.in))
			got, err := readReply(r)
			if err != nil {
				t.Fatalf("readReply(%q): %v", tt.in, err)
			}
			if got.String() != tt.want || got.Kind != tt.kind {
				t.Errorf("readReply(%q) = %q (kind %v), want %q (kind %v)", tt.in, got, got.Kind, tt.want, tt.kind)
			}
			if rest, _ := io.ReadAll(r); len(rest) != 0 {
				t.Errorf("readReply(%q) left %q unread", tt.in, rest)
			}
		})
	}
}

// Malformed or truncated input must surface as an error, never as a
// plausible reply or a hang.
func TestReadReplyMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"eof", ""},
		{"no CRLF", "+OK\n"},
		{"empty line", "\r\n"},
		{"unknown type", "%1\r\n"},
		{"bad integer", ":x\r\n"},
		{"bad length", "$x\r\n"},
		{"negative length", "$-2\r\n"},
		{"huge length", "$999999999999\r\n"},
		{"short bulk", "$5\r\nhi\r\n"},
		{"bulk without CRLF", "$2\r\nhiXY"},
		{"short array", "*2\r\n:1\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := readReply(bufio.NewReader(strings.NewReader(tt.in))); err == nil {
				t.Errorf("readReply(%q) = %q, want an error", tt.in, got)
			}
		})
	}
}

func TestWriteCommand(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	writeCommand(w, []string{"SET", "k", "a\r\nb", ""})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$0\r\n\r\n"
	if buf.String() != want {
		t.Errorf("writeCommand = %q, want %q", buf.String(), want)
	}
}
