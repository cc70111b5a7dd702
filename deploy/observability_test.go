package deploy

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	alertRules     = "prometheus/floodgate-alerts.yaml"
	alertTests     = "prometheus/floodgate-alerts.test.yaml"
	dashboardFile  = "grafana/floodgate-dashboard.json"
	dashboardInput = "${DS_PROMETHEUS}"
)

// metricName finds the names of Floodgate's metrics in PromQL (and, quoted,
// in Go source).
var metricName = regexp.MustCompile(`floodgate_[a-z_]+`)

// exportedMetrics are the metric names Floodgate's Go source (outside its
// tests) declares as string literals: what serve and the proxy export. A
// metric renamed there disappears from this set, so a dashboard or rule
// still naming it fails the tests below.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	quoted := regexp.MustCompile(`"(floodgate_[a-z_]+)"`)
	names := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range quoted.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"floodgate_decisions_total", "floodgate_shed_total", "floodgate_decision_duration_seconds"} {
		if !names[must] {
			t.Fatalf("the scan of the source found no %s (found %v): is the repository beside deploy/?", must, names)
		}
	}
	return names
}

// unknownMetrics returns the floodgate_ names in expr that Floodgate does
// not export; a histogram's series (_bucket, _sum, _count) count as its
// name.
func unknownMetrics(expr string, exported map[string]bool) []string {
	var bad []string
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] {
			bad = append(bad, name)
		}
	}
	return bad
}

// The dashboard as far as the tests read it.
type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string     `json:"name"`
			Datasource datasource `json:"datasource"`
			Definition string     `json:"definition"`
			Multi      bool       `json:"multi"`
			IncludeAll bool       `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// drawing returns the dashboard's panels that draw, rows' included.
func (d dashboard) drawing() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// The dashboard imports with a Prometheus of the importer's choosing,
// filters by policy, and every panel queries only metrics Floodgate
// exports; every exported metric is on some panel.
func TestDashboardQueriesWhatFloodgateExports(t *testing.T) {
	exported := exportedMetrics(t)
	d := loadDashboard(t)
	if len(d.Inputs) != 1 || "${"+d.Inputs[0].Name+"}" != dashboardInput || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs %+v; want one Prometheus datasource input DS_PROMETHEUS", d.Inputs)
	}
	if d.UID == "" {
		t.Error("no uid: links to the dashboard would break on every import")
	}
	var policyVar bool
	for _, v := range d.Templating.List {
		if v.Name == "policy" {
			policyVar = v.Datasource.UID == dashboardInput && v.Multi && v.IncludeAll &&
				strings.Contains(v.Definition, "label_values(floodgate_decisions_total, policy)")
		}
	}
	if !policyVar {
		t.Errorf("templating %+v: want a multi-value policy variable with All, over label_values(floodgate_decisions_total, policy) from %s", d.Templating.List, dashboardInput)
	}
	used := map[string]bool{}
	ids := map[int]string{}
	for _, p := range d.drawing() {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Datasource == nil || p.Datasource.UID != dashboardInput {
			t.Errorf("panel %q: datasource %+v, want uid %s", p.Title, p.Datasource, dashboardInput)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if bad := unknownMetrics(tg.Expr, exported); len(bad) > 0 || !metricName.MatchString(tg.Expr) {
				t.Errorf("panel %q: %q names %v, which Floodgate does not export (or no floodgate_ metric)", p.Title, tg.Expr, bad)
			}
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(m, "_bucket")] = true
			}
		}
	}
	for name := range exported {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// The alerting rules as far as the tests read them.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         *string           `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// The unit-test file as far as the tests read it.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// readYAML decodes path into v; strictly (no field v does not know) when
// v describes the whole file.
func readYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decode := yaml.Unmarshal
	if strict {
		decode = yaml.UnmarshalStrict
	}
	if err := decode(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every alert names only exported metrics, waits (for:) before firing,
// carries a severity and says what happened and what to do, and has a
// unit test in which it fires.
func TestAlertRulesAreCompleteAndTested(t *testing.T) {
	exported := exportedMetrics(t)
	var rules ruleFile
	readYAML(t, alertRules, &rules, true)
	var tests ruleTests
	readYAML(t, alertTests, &tests, false)
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(alertRules)}) {
		t.Errorf("%s tests rule_files %v, want [%s]", alertTests, tests.RuleFiles, filepath.Base(alertRules))
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (expr %q): recording rules belong elsewhere", g.Name, r.Expr)
				continue
			}
			if bad := unknownMetrics(r.Expr, exported); len(bad) > 0 || !metricName.MatchString(r.Expr) {
				t.Errorf("%s: %q names %v, which Floodgate does not export (or no floodgate_ metric)", r.Alert, r.Expr, bad)
			}
			if r.For == nil {
				t.Errorf("%s: no for: say how long the condition must hold (0m for at once)", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || len(r.Annotations["description"]) < 80 {
				t.Errorf("%s: annotations %v: want a summary and a description that says what to do", r.Alert, r.Annotations)
			}
			if !fires[r.Alert] {
				t.Errorf("%s: no test in %s in which it fires", r.Alert, alertTests)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s holds no rules", alertRules)
	}
}

// requireTool returns the path of a Prometheus tool, or skips the test
// when it is missing unless FLOODGATE_REQUIRE_PROMETHEUS=1 (CI) makes that
// a failure.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("FLOODGATE_REQUIRE_PROMETHEUS") == "1" {
		t.Fatalf("%s is not installed and FLOODGATE_REQUIRE_PROMETHEUS=1: apt-get install prometheus", name)
	}
	t.Skipf("%s is not installed (Debian: apt-get install prometheus; FLOODGATE_REQUIRE_PROMETHEUS=1 makes this a failure)", name)
	return ""
}

// promtool accepts the rules and their unit tests pass.
func TestPromtoolChecksAndTestsTheRules(t *testing.T) {
	promtool := requireTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", filepath.Base(alertRules)},
		{"test", "rules", filepath.Base(alertTests)},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(alertRules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
