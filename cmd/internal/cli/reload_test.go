package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/watch"
)

// Two domains: api with two limits, web with one.
const (
	apiPolicy = `domain: api
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 50000
  - key: ip
    rate_limit:
      unit: second
      requests_per_unit: 10
`
	webPolicy = "domain: web\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
)

// policyHeld stands for the engine: it holds the policy in force.
type policyHeld struct{ set *policy.Set }

func (h *policyHeld) Policies() *policy.Set { return h.set }
func (h *policyHeld) Reload(s *policy.Set)  { h.set = s }

// reloadRig is a reloader over a directory of policy files, its log, the
// results it counted, and a clock that runs each settle wait at once after
// calling during (if set) with the number of the wait.
type reloadRig struct {
	t      *testing.T
	dir    string
	r      *reloader
	held   *policyHeld
	logs   *bytes.Buffer
	counts []bool
	waits  int
	during func(wait int)
}

func newReloadRig(t *testing.T, flags reloadFlags, files map[string]string) *reloadRig {
	t.Helper()
	g := &reloadRig{t: t, dir: t.TempDir(), logs: &bytes.Buffer{}}
	for name, content := range files {
		g.write(name, content)
	}
	set, err := loadPolicies(g.dir, flags)
	if err != nil {
		t.Fatal(err)
	}
	g.held = &policyHeld{set}
	g.r = &reloader{path: g.dir, flags: flags, holder: g.held, log: slog.New(slog.NewTextHandler(g.logs, nil)),
		counted: func(ok bool) { g.counts = append(g.counts, ok) },
		after: func(wait time.Duration) <-chan time.Time {
			if wait != watch.Settle {
				t.Errorf("waited %v, want watch.Settle", wait)
			}
			g.waits++
			if g.during != nil {
				g.during(g.waits)
			}
			c := make(chan time.Time, 1)
			c <- time.Time{}
			return c
		}}
	return g
}

func (g *reloadRig) write(name, content string) {
	g.t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, name), []byte(content), 0o644); err != nil {
		g.t.Fatal(err)
	}
}

func (g *reloadRig) remove(name string) {
	g.t.Helper()
	if err := os.Remove(filepath.Join(g.dir, name)); err != nil {
		g.t.Fatal(err)
	}
}

// inForce lists the domains in force, then their limits as path=limit,
// sorted.
func (g *reloadRig) inForce() string {
	var out []string
	for _, d := range g.held.set.Domains() {
		p, _ := g.held.set.Policy(d)
		for _, r := range p.Rules() {
			out = append(out, r.Path+"="+r.Limit.String())
		}
	}
	slices.Sort(out)
	return strings.Join(g.held.set.Domains(), ",") + ": " + strings.Join(out, " ")
}

type outcome int

const (
	applied  outcome = iota
	refused          // an error: the policy in force stays
	heldBack         // a loss the watcher may not apply: the policy in force stays
)

var outcomeNames = map[outcome]string{applied: "applied", refused: "refused", heldBack: "held back"}

// What a reload does with each kind of change, from the watcher and at the
// operator's word, under each flag. The policy in force changes only when
// the reload is applied; a change that holds no policy is never applied
// without --allow-empty-config; a loss is applied by the watcher only
// with --config-allow-shrink.
func TestReloadKeepsTheLastGoodPolicy(t *testing.T) {
	none := reloadFlags{}
	empty := reloadFlags{allowEmpty: true}
	shrink := reloadFlags{allowShrink: true}
	both := reloadFlags{allowEmpty: true, allowShrink: true}
	changes := map[string]func(g *reloadRig){
		"every file deleted": func(g *reloadRig) { g.remove("api.yaml"); g.remove("web.yaml") },
		"a log file only":    func(g *reloadRig) { g.remove("api.yaml"); g.remove("web.yaml"); g.write("serve.log", "x") },
		"a domain dropped":   func(g *reloadRig) { g.remove("web.yaml") },
		"a limit dropped":    func(g *reloadRig) { g.write("api.yaml", strings.Split(apiPolicy, "  - key: ip")[0]) },
		"a limit lowered":    func(g *reloadRig) { g.write("api.yaml", strings.Replace(apiPolicy, "50000", "500", 1)) },
		"a limit added": func(g *reloadRig) {
			g.write("api.yaml", apiPolicy+"  - key: path\n    rate_limit: {unit: hour, requests_per_unit: 9}\n")
		},
		"a domain added": func(g *reloadRig) { g.write("new.yml", "domain: new\n") },
		"a broken file":  func(g *reloadRig) { g.write("api.yaml", "domain: [\n") },
	}
	for _, tc := range []struct {
		change            string
		flags             reloadFlags
		watched, explicit outcome
		log               string // in the log line of the watched reload
	}{
		{"every file deleted", none, refused, refused, `level=ERROR msg="config reload failed; keeping the policies in force" error="` + "%DIR: no policy"},
		{"a log file only", none, refused, refused, "no policy: no *.yaml or *.yml file to load (--allow-empty-config runs without one)"},
		{"every file deleted", empty, heldBack, applied, "level=WARN msg=\"config change held back: it drops domains or limits in force; send SIGHUP or POST /admin/reload to apply it, or run with --config-allow-shrink\" config=%DIR dropped_domains=\"[api web]\" dropped_limits=[]"},
		{"every file deleted", shrink, refused, refused, "no policy"},
		{"every file deleted", both, applied, applied, `msg="config reloaded" domains=[] routes=0 dropped_domains="[api web]"`},
		{"a domain dropped", none, heldBack, applied, "dropped_domains=[web] dropped_limits=[]"},
		{"a domain dropped", shrink, applied, applied, "dropped_domains=[web]"},
		{"a limit dropped", none, heldBack, applied, "dropped_domains=[] dropped_limits=[api.ip]"},
		{"a limit dropped", shrink, applied, applied, "dropped_limits=[api.ip]"},
		{"a limit lowered", none, applied, applied, `level=INFO msg="config reloaded" domains="[api web]" routes=0` + "\n"},
		{"a limit added", none, applied, applied, "config reloaded"},
		{"a domain added", none, applied, applied, "config reloaded"},
		{"a broken file", both, refused, refused, "api.yaml:2: invalid YAML"},
	} {
		for _, explicit := range []bool{false, true} {
			want, trigger := tc.watched, "watched"
			if explicit {
				want, trigger = tc.explicit, "explicit"
			}
			t.Run(tc.change+"/"+trigger+"/"+reloadFlagNames(tc.flags), func(t *testing.T) {
				g := newReloadRig(t, tc.flags, map[string]string{"api.yaml": apiPolicy, "web.yaml": webPolicy})
				before := g.inForce()
				changes[tc.change](g)
				var err error
				if explicit {
					err = g.r.explicit()
				} else {
					err = g.r.watched(context.Background())
				}
				got := applied
				switch {
				case errors.Is(err, errHeldBack):
					got = heldBack
				case err != nil:
					got = refused
				}
				if got != want {
					t.Fatalf("%s (error %v), want %s; log:\n%s", outcomeNames[got], err, outcomeNames[want], g.logs)
				}
				if kept := g.inForce() == before; kept != (want != applied) {
					t.Errorf("in force %q, before %q: kept %v, want kept %v", g.inForce(), before, kept, want != applied)
				}
				if !slices.Equal(g.counts, []bool{want == applied}) {
					t.Errorf("counted %v, want [%v]: a held-back change counts as a failure", g.counts, want == applied)
				}
				if wantLog := strings.ReplaceAll(tc.log, "%DIR", g.dir); !explicit && !strings.Contains(g.logs.String(), wantLog) {
					t.Errorf("log:\n%s\nwant it to contain\n%s", g.logs, wantLog)
				}
				if explicit && g.waits != 0 {
					t.Errorf("an explicit reload waited %d times for the files to settle: the operator says they are", g.waits)
				}
			})
		}
	}
}

func reloadFlagNames(f reloadFlags) string {
	var names []string
	if f.allowEmpty {
		names = append(names, "allow-empty-config")
	}
	if f.allowShrink {
		names = append(names, "config-allow-shrink")
	}
	if names == nil {
		return "no flag"
	}
	return strings.Join(names, "+")
}

// A watched reload reads the files, waits watch.Settle and reads them
// again; it applies them only once two reads agree, so a file caught
// mid-write (still valid YAML: 50000/s cut to 500/s and a limit gone) is
// never in force, and gives up, keeping the policy, when the files do not
// settle within watch.MaxWait.
func TestWatchedReloadWaitsForTheFilesToSettle(t *testing.T) {
	// A write cut short leaves valid YAML: 40000/s read as 400/s.
	policy := func(userRate string) string {
		return "domain: api\ndescriptors:\n  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 10}\n" +
			"  - key: user\n    rate_limit:\n      unit: second\n      requests_per_unit: " + userRate + "\n"
	}
	for _, tc := range []struct {
		name    string
		first   string           // api.yaml when the reload starts
		during  func(int) string // api.yaml written during the n-th wait; "" writes nothing
		waits   int
		inForce string
		err     string
	}{
		{"files at rest", policy("40000"), func(int) string { return "" }, 1,
			"api: api.ip=fixed_window 10/1s api.user=fixed_window 40000/1s", ""},
		{"a write that completes over two waits", policy("400"), func(n int) string {
			return map[int]string{1: policy("4000"), 2: policy("40000")}[n]
		}, 3, "api: api.ip=fixed_window 10/1s api.user=fixed_window 40000/1s", ""},
		{"a write that never ends", policy("400"), func(n int) string { return policy(strings.Repeat("4", n)) }, int(watch.MaxWait / watch.Settle),
			"api: api.ip=fixed_window 10/1s api.user=fixed_window 50000/1s", "still being written after 1s: not loaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newReloadRig(t, reloadFlags{}, map[string]string{"api.yaml": policy("50000")})
			g.write("api.yaml", tc.first)
			g.during = func(n int) {
				if content := tc.during(n); content != "" {
					g.write("api.yaml", content)
				}
			}
			err := g.r.watched(context.Background())
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q; log:\n%s", err, tc.err, g.logs)
			}
			if g.waits != tc.waits {
				t.Errorf("waited %d times, want %d", g.waits, tc.waits)
			}
			if got := g.inForce(); got != tc.inForce {
				t.Errorf("in force:\n%s\nwant\n%s", got, tc.inForce)
			}
		})
	}
	t.Run("the service stops during the wait", func(t *testing.T) {
		g := newReloadRig(t, reloadFlags{}, map[string]string{"api.yaml": apiPolicy})
		ctx, cancel := context.WithCancel(context.Background())
		g.during = func(int) { cancel() }
		g.r.after = func(time.Duration) <-chan time.Time { g.during(1); return nil }
		if err := g.r.watched(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if len(g.counts) != 0 || g.logs.Len() != 0 {
			t.Errorf("a reload cut short by shutdown counted %v and logged %q: it is no failure", g.counts, g.logs)
		}
	})
}

// policyLoss names every domain and limit a new policy drops, once per
// limit, and nothing for a limit that only changes its values.
func TestPolicyLoss(t *testing.T) {
	set := func(files ...string) *policy.Set {
		var ps []*policy.Policy
		for i, f := range files {
			p, err := config.Parse(string(rune('a'+i))+".yaml", []byte(f))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		s, err := policy.NewSet(ps...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	twoOnUser := "domain: api\ndescriptors:\n  - key: user\n    rate_limits:\n      - {unit: second, requests_per_unit: 5}\n      - {unit: hour, requests_per_unit: 100}\n"
	for _, tc := range []struct {
		name            string
		old, new        *policy.Set
		domains, limits string
	}{
		{"the same", set(apiPolicy, webPolicy), set(apiPolicy, webPolicy), "", ""},
		{"values changed", set(apiPolicy), set(strings.Replace(apiPolicy, "50000", "5", 1)), "", ""},
		{"a domain and a limit", set(apiPolicy, webPolicy), set(strings.Split(apiPolicy, "  - key: ip")[0]), "web", "api.ip"},
		{"one of two limits of a descriptor", set(twoOnUser), set(strings.Split(twoOnUser, "      - {unit: hour")[0]), "", "api.user"},
		{"everything", set(apiPolicy), set(), "api", ""},
		{"from nothing", set(), set(apiPolicy), "", ""},
	} {
		l := policyLoss(tc.old, tc.new)
		if d, lim := strings.Join(l.domains, ","), strings.Join(l.limits, ","); d != tc.domains || lim != tc.limits {
			t.Errorf("%s: lost domains %q limits %q, want %q %q", tc.name, d, lim, tc.domains, tc.limits)
		}
	}
	if got := capped([]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}); len(got) != maxListed+1 || got[maxListed] != "... and 2 more" {
		t.Errorf("capped: %v", got)
	}
}
