package testkit

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Serving is what a `floodgate serve` process logs when it starts serving
// (its JSON "floodgate serving" line): the addresses it bound, the domains
// it loaded.
type Serving struct {
	HTTP    string   `json:"http"`
	GRPC    string   `json:"grpc"`
	Domains []string `json:"domains"`
}

// ReadServing reads a `floodgate serve --log-format json` log until its
// "floodgate serving" line; an exit or a start-up error ends the stream
// first, and the error quotes what was logged.
func ReadServing(r io.Reader) (Serving, error) {
	sc := bufio.NewScanner(r)
	var seen []string
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
			Serving
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "floodgate serving" {
			return line.Serving, nil
		}
		seen = append(seen, sc.Text())
	}
	return Serving{}, errors.New("exited before serving; it logged:\n" + strings.Join(seen, "\n"))
}
