package testkit_test

import (
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

func TestReadServing(t *testing.T) {
	log := `{"level":"INFO","msg":"compat"}
{"level":"INFO","msg":"floodgate serving","http":"127.0.0.1:1","grpc":"127.0.0.1:2","domains":["a","b"]}
`
	s, err := testkit.ReadServing(strings.NewReader(log))
	if err != nil || s.HTTP != "127.0.0.1:1" || s.GRPC != "127.0.0.1:2" || len(s.Domains) != 2 {
		t.Fatalf("ReadServing = %+v, %v", s, err)
	}
	_, err = testkit.ReadServing(strings.NewReader("{\"msg\":\"--redis: bad address\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "bad address") {
		t.Fatalf("a log without the line: %v, want an error quoting it", err)
	}
}
