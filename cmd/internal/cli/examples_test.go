package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// examples is the repository's examples/ folder, whose policies the
// README's commands use.
var examples = filepath.Join("..", "..", "..", "examples")

// Each example policy passes config check as the README's commands use
// it: the policies directory under serve's default strategy, the fleet
// file under every strategy (its limits name their own), and the
// gateway's policy with the routes the proxy requires.
func TestExamplesPassConfigCheck(t *testing.T) {
	policies, gateway := filepath.Join(examples, "policies"), filepath.Join(examples, "policy.yaml")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{policies}, []string{`domain "api": 6 limits`, `domain "fleet": 2 limits`}},
		{[]string{"--strategy", "leased", filepath.Join(policies, "fleet.yaml")}, []string{`domain "fleet": 2 limits`}},
		{[]string{"--strategy", "gossip", filepath.Join(policies, "fleet.yaml")}, []string{`domain "fleet": 2 limits`}},
		{[]string{gateway}, []string{`domain "gateway": 2 limits`}},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"config", "check"}, tc.args...), &out, &errOut)
		for _, want := range tc.want {
			if code != 0 || !strings.Contains(out.String(), want) {
				t.Errorf("config check %v: exit %d, stdout %q, stderr %q; want exit 0 and %q", tc.args, code, out.String(), errOut.String(), want)
			}
		}
	}
	set, err := loadPolicies(gateway, reloadFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if err := requireRoutes(gateway, reloadFlags{})(set); err != nil {
		t.Errorf("the proxy would refuse %s: %v", gateway, err)
	}
}
