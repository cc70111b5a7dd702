package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersionPrintsName(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "floodgate ") {
		t.Fatalf("version output %q does not start with %q", out.String(), "floodgate ")
	}
}

func TestUnknownCommandFails(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"no-such-command"}, &out, &errOut); code == 0 {
		t.Fatal("unknown command exited 0")
	}
	if !strings.Contains(errOut.String(), "no-such-command") {
		t.Fatalf("error %q does not name the unknown command", errOut.String())
	}
}
