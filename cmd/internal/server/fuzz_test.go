package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

func fuzzServer(f *testing.F) *server.Server {
	clock := floodgate.NewManualClock(start)
	mem := floodgate.NewMemory(floodgate.WithClock(clock))
	return server.New(server.Options{
		Engine:  engine.New(servicetest.Policies(f, policy), engine.OneStore{Limiter: mem}),
		Limiter: mem,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Headers: true,
	})
}

// checkAnswer fails unless the answer is a decision or a named 400.
func checkAnswer(t *testing.T, body string, code int, resp []byte) {
	switch code {
	case 200, 429:
		var m map[string]any
		if err := json.Unmarshal(resp, &m); err != nil {
			t.Fatalf("%q: %d with a body that is not JSON: %q", body, code, resp)
		}
	case 400:
		var e struct{ Error string }
		if err := json.Unmarshal(resp, &e); err != nil || e.Error == "" {
			t.Fatalf("%q: 400 without a named problem: %q", body, resp)
		}
	default:
		t.Fatalf("%q: status %d %s", body, code, resp)
	}
}

// FuzzAllowRequest: no body makes POST /v1/allow panic or fail other than
// with a 400 that names the problem.
func FuzzAllowRequest(f *testing.F) {
	for _, seed := range []string{
		`{"key":"user:42","limit":{"algorithm":"token_bucket","rate":10,"period":"1s","burst":10},"cost":1}`,
		`{"key":"k","limit":{"algorithm":"sliding_window","rate":9223372036854775807,"period":"2562047h47m16.854775807s"},"cost":4294967296}`,
		`{"key":"k","limit":{"algorithm":"leaky_bucket","rate":1,"period":"1us","burst":9223372036854775807}}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"42"}]}],"cost":1}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"a"}]},{"entries":[{"key":"path","value":"/blocked"}]}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"report","value":"\u0000\"%"}]}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k"}],"costs":{"tpm":500,"rpm":0}}],"cost":0}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k"}],"costs":{"":-1,"nope":4294967297}}]}`,
		`{"key":null,"domain":null}`,
		`{"cost":-9223372036854775808}`,
		`[]`, `null`, `""`, `{`, `{}{}`, "",
	} {
		f.Add(seed)
	}
	h := fuzzServer(f).Handler()
	f.Fuzz(func(t *testing.T, body string) {
		rec := serveRecorder(h, "POST", "/v1/allow", body)
		checkAnswer(t, body, rec.Code, rec.Body.Bytes())
	})
}

// FuzzRLSJSON does the same for Envoy's POST /json.
func FuzzRLSJSON(f *testing.F) {
	for _, seed := range []string{
		`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"42"}]}],"hitsAddend":1}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"x"}],"limit":{"requestsPerUnit":1,"unit":"YEAR","unitMultiplier":4294967295},"hitsAddend":"18446744073709551615"}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"beta","value":"b"}],"isNegativeHits":true}]}`,
		`{}`, `[]`, "",
	} {
		f.Add(seed)
	}
	h := fuzzServer(f).Handler()
	f.Fuzz(func(t *testing.T, body string) {
		rec := serveRecorder(h, "POST", "/json", body)
		checkAnswer(t, body, rec.Code, rec.Body.Bytes())
	})
}

// FuzzAdjustRequest does the same for POST /v1/adjust.
func FuzzAdjustRequest(f *testing.F) {
	for _, seed := range []string{
		`{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k"}]}],"cost":-300}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k"}],"costs":{"tpm":-9223372036854775808}}]}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k"}],"costs":{"rpm":1,"tpm":-1}}],"cost":0}`,
		`{"domain":"api","descriptors":[{"entries":[{"key":"path","value":"/blocked"}]}],"cost":4294967296}`,
		`{"key":"k","cost":1}`, `{}`, `[]`, "",
	} {
		f.Add(seed)
	}
	h := fuzzServer(f).Handler()
	f.Fuzz(func(t *testing.T, body string) {
		rec := serveRecorder(h, "POST", "/v1/adjust", body)
		checkAnswer(t, body, rec.Code, rec.Body.Bytes())
	})
}
