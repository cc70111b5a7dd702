package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// promDeadline bounds the whole end-to-end test: Prometheus starts in a
// second or two and scrapes every second, so this is a generous allowance
// for a busy machine, only so that a wedged Prometheus fails the test
// instead of hanging it.
const promDeadline = 30 * time.Second

// A real Prometheus scrapes a running floodgate serve: the denials it
// made are there under the documented names and labels, a rate over them
// sums by policy, the alerting rules load and evaluate without error, and
// every query of the dashboard runs.
func TestPrometheusScrapesFloodgate(t *testing.T) {
	prometheus := requireTool(t, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), promDeadline)
	defer cancel()

	srv := startServe(t, "--config", composePolicy, "--admin-token", "deploytest-token")
	login := loginAsker(t, ctx, srv.GRPC)
	// The compose policy allows 3 logins a minute per address.
	login(5)

	p := startPrometheus(t, prometheus, srv.HTTP)
	p.eventually(ctx, "the target is up", func() (bool, string) {
		var targets struct {
			ActiveTargets []struct {
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				ScrapeURL string `json:"scrapeUrl"`
			} `json:"activeTargets"`
		}
		if err := p.get(ctx, "/api/v1/targets", nil, &targets); err != nil {
			return false, err.Error()
		}
		ok := len(targets.ActiveTargets) == 1 && targets.ActiveTargets[0].Health == "up"
		return ok, fmt.Sprintf("%+v", targets.ActiveTargets)
	})

	denied := `floodgate_decisions_total{result="denied"}`
	want := map[string]string{"__name__": "floodgate_decisions_total", "job": "floodgate", "instance": srv.HTTP,
		"policy": "edge", "limit": "login-per-address", "result": "denied"}
	p.eventually(ctx, denied+" is 2", func() (bool, string) {
		v, err := p.query(ctx, denied)
		return err == nil && len(v) == 1 && maps.Equal(v[0].Metric, want) && v[0].value() == "2", fmt.Sprint(v, err)
	})

	// Four more denials after the first scrapes, so that the counter
	// rises within the rate's window.
	login(4)
	perPolicy := `sum by (policy) (rate(floodgate_decisions_total[1m]))`
	p.eventually(ctx, perPolicy+" is one positive series, policy edge", func() (bool, string) {
		v, err := p.query(ctx, perPolicy)
		return err == nil && len(v) == 1 && maps.Equal(v[0].Metric, map[string]string{"policy": "edge"}) &&
			v[0].value() != "0", fmt.Sprint(v, err)
	})

	var rules ruleFile
	readYAML(t, alertRules, &rules, true)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	p.eventually(ctx, "the alerting rules are loaded and evaluated", func() (bool, string) {
		var loaded struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := p.get(ctx, "/api/v1/rules", nil, &loaded); err != nil {
			return false, err.Error()
		}
		var names []string
		healthy := true
		for _, g := range loaded.Groups {
			for _, r := range g.Rules {
				names = append(names, r.Name)
				healthy = healthy && r.Health == "ok" && r.LastError == ""
			}
		}
		return healthy && slices.Equal(names, alerts), fmt.Sprintf("%+v", loaded.Groups)
	})

	// Grafana fills in the variables; any value will do to see that
	// Prometheus parses and evaluates each panel's query.
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__range", "5m", "$policy", ".*")
	for _, pn := range loadDashboard(t).drawing() {
		for _, tg := range pn.Targets {
			if _, err := p.query(ctx, vars.Replace(tg.Expr)); err != nil {
				t.Errorf("panel %q: %v", pn.Title, err)
			}
		}
	}
}

// loginAsker returns a function that sends n login descriptors of one
// address to serve's gRPC rate-limit service, as Envoy does for POST /login.
func loginAsker(t *testing.T, ctx context.Context, addr string) func(n int) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 1, Descriptors: []*commonrl.RateLimitDescriptor{{
		Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "login"}, {Key: "remote_address", Value: "192.0.2.77"}},
	}}}
	return func(n int) {
		t.Helper()
		for range n {
			if _, err := client.ShouldRateLimit(ctx, req); err != nil {
				t.Fatalf("ShouldRateLimit: %v", err)
			}
		}
	}
}

// promServer is a Prometheus the test started.
type promServer struct {
	t    *testing.T
	base string
	log  *bytes.Buffer // its output, shown when the test fails
}

// startPrometheus runs prometheus on a free port of 127.0.0.1, scraping
// target's /metrics every second and evaluating the alerting rules every
// second, its storage in a temporary directory; it is stopped by its PID
// when the test ends.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	rules, err := filepath.Abs(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: floodgate
    static_configs:
      - targets: [%q]
`, rules, target)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file", configFile, "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", addr, "--log.level", "warn")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	p := &promServer{t: t, base: "http://" + addr, log: &log}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus logged:\n%s", log.String())
		}
	})
	return p
}

// freeAddr returns an address of 127.0.0.1 with a port no one listens on
// now (Prometheus has no way to report a port it picked itself).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get calls an API path of Prometheus and decodes its data field into v.
func (p *promServer) get(ctx context.Context, path string, q url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s %v: %s: %s", path, q, resp.Status, body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

// sample is one series of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [time, "value"]
}

func (s sample) value() string { v, _ := s.Value[1].(string); return v }

// query evaluates expr now and returns its instant vector.
func (p *promServer) query(ctx context.Context, expr string) ([]sample, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []sample `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", expr, data.ResultType)
	}
	return data.Result, nil
}

// eventually polls cond every 100 ms until it holds, failing the test
// with cond's last word when ctx ends first.
func (p *promServer) eventually(ctx context.Context, what string, cond func() (bool, string)) {
	p.t.Helper()
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("waited %v for %s; last seen: %s", promDeadline, what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
