// Package excerpt quotes untrusted input in error messages without echoing
// all of it: a caller that sends a megabyte-long key gets an error of a few
// dozen bytes, not the megabyte back (in a 400 body, a gRPC status, a log
// line).
package excerpt

import (
	"strconv"
	"unicode/utf8"
)

// Bytes is the most of the input an excerpt quotes.
const Bytes = 32

// Quote returns s quoted as Go would (strconv.Quote) when it is at most
// Bytes long; otherwise its first Bytes bytes (cut back to a whole UTF-8
// character), quoted, then "…" and the full length: "\"aaaa…\" (1000000
// bytes)". The result is at most about 4·Bytes+32 bytes whatever s is.
func Quote(s string) string {
	if len(s) <= Bytes {
		return strconv.Quote(s)
	}
	return strconv.Quote(prefix(s, Bytes)+"…") + " (" + strconv.Itoa(len(s)) + " bytes)"
}

// MessageBytes is the most of an error message Message keeps.
const MessageBytes = 512

// Message bounds an error message that goes back to a client: s itself
// when it is at most MessageBytes long, else its first MessageBytes bytes,
// "…" and the full length. It is the last guard for messages built by
// code that quotes its input whole (JSON and protobuf decoders naming an
// unknown field or a bad token); messages of our own quote with Quote.
func Message(s string) string {
	if len(s) <= MessageBytes {
		return s
	}
	return prefix(s, MessageBytes) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// prefix is s cut to at most n bytes, back to a whole UTF-8 character.
func prefix(s string, n int) string {
	cut := n
	for cut > n-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
