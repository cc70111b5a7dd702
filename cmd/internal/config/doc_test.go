package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
)

// The YAML examples of the package documentation load.
func TestDocumentationExamples(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\t"):
			cur = append(cur, strings.TrimPrefix(line, "//\t"))
		case line == "//" && cur != nil:
			cur = append(cur, "")
		case cur != nil:
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("%d YAML examples in doc.go", len(blocks))
	}
	for i, b := range blocks {
		if !strings.HasPrefix(b, "domain:") {
			b = "domain: example\n" + b
		}
		if _, err := config.Parse("doc.go example", []byte(b)); err != nil {
			t.Errorf("example %d: %v\n%s", i+1, err, b)
		}
	}
}
