package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The bulkhead and breaker flags refuse bad values naming the flag.
func TestProxyRejectsBadConcurrencyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "0"}, `--concurrency "0": want adaptive, off or a whole number`},
		{[]string{"--concurrency", "lots"}, `--concurrency "lots"`},
		{[]string{"--concurrency", "10", "--concurrency-algorithm", "aimd"}, "--concurrency-algorithm aimd: --concurrency 10 is fixed"},
		{[]string{"--concurrency", "adaptive", "--concurrency-algorithm", "cubic"}, `--concurrency-algorithm "cubic": want gradient2, aimd, vegas`},
		{[]string{"--queue", "5"}, "--queue needs --concurrency"},
		{[]string{"--concurrency", "off", "--max-wait", "1s"}, "--max-wait needs --concurrency"},
		{[]string{"--concurrency", "5", "--queue", "0", "--max-wait", "1s"}, "--max-wait 1s needs --queue"},
		{[]string{"--concurrency", "5", "--queue", "-1"}, "--queue -1: want a whole number from 0"},
		{[]string{"--concurrency", "5", "--queue", "3", "--max-wait", "0s"}, `invalid argument "0s" for "--max-wait"`},
		{[]string{"--upstream-breaker-failures", "-2"}, "--upstream-breaker-failures -2"},
		{[]string{"--upstream-breaker-failures", "3", "--upstream-breaker-cool-down", "0s"}, `"--upstream-breaker-cool-down"`},
		{[]string{"--concurrency", "adaptive", "--priority-header", "X Priority"}, `--priority-header: httplimit: invalid options: PriorityHeader "X Priority"`},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--limit", "10/s"}, tc.args...)
		code := Main(context.Background(), args, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}
