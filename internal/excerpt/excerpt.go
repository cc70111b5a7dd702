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
	cut := Bytes
	for cut > Bytes-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]+"…") + " (" + strconv.Itoa(len(s)) + " bytes)"
}
