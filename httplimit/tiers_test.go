package httplimit

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// perKeyPlans are the plans of these tests: free keys get 2 requests a
// minute, pro keys 5, enterprise keys no limit of their plan.
func perKeyPlans() map[string][]Rule {
	perKey := func(n int64) []Rule {
		return []Rule{{Name: "per-key", Limit: floodgate.PerMinute(n), Key: ByHeader("X-Api-Key")}}
	}
	return map[string][]Rule{"free": perKey(2), "pro": perKey(5), "enterprise": nil}
}

// step is one request of a scenario and what it must get.
type step struct {
	name   string
	hdr    []string
	status int
	policy string // RateLimit-Policy; "" for none
	detail string // in the problem's detail, for a refused request
}

// run sends the steps in order to url.
func run(t *testing.T, url string, steps []step) {
	t.Helper()
	for _, s := range steps {
		r := get(t, url, s.hdr...)
		if r.status != s.status {
			t.Fatalf("%s: status %d, want %d (%s)", s.name, r.status, s.status, r.body)
		}
		if got := r.header.Get("RateLimit-Policy"); got != s.policy {
			t.Fatalf("%s: RateLimit-Policy %q, want %q", s.name, got, s.policy)
		}
		if s.detail != "" {
			if got, _ := decodeProblem(t, r)["detail"].(string); !strings.Contains(got, s.detail) {
				t.Fatalf("%s: detail %q, want it to say %q", s.name, got, s.detail)
			}
		}
	}
}

// repeat is n copies of s.
func repeat(n int, s step) []step { return slices.Repeat([]step{s}, n) }

const (
	freePolicy = `"free/per-key";q=2;w=60`
	proPolicy  = `"pro/per-key";q=5;w=60`
)

func TestTiersFromAPIKeyTable(t *testing.T) {
	url := serve(t, frozenMemory(), Options{Tiers: &Tiers{
		Plans:        perKeyPlans(),
		APIKeyHeader: "X-Api-Key",
		APIKeys:      map[string]string{"k-free-1": "free", "k-free-2": "free", "k-pro": "pro", "k-ent": "enterprise"},
	}}, nil)
	var steps []step
	steps = append(steps, repeat(5, step{"pro key", []string{"X-Api-Key", "k-pro"}, 200, proPolicy, ""})...)
	steps = append(steps, step{"pro key, 6th", []string{"X-Api-Key", "k-pro"}, 429, proPolicy, ""})
	// A free key that claims to be pro is still free: the table decides.
	spoof := []string{"X-Api-Key", "k-free-1", "X-Plan", "pro"}
	steps = append(steps, repeat(2, step{"free key claiming pro", spoof, 200, freePolicy, ""})...)
	steps = append(steps, step{"free key claiming pro, 3rd", spoof, 429, freePolicy, ""})
	steps = append(steps,
		step{"another free key has its own counter", []string{"X-Api-Key", "k-free-2"}, 200, freePolicy, ""},
		step{"enterprise: no limit of its plan", []string{"X-Api-Key", "k-ent"}, 200, "", ""},
		step{"unknown key", []string{"X-Api-Key", "k-stolen"}, 403, "", "unknown API key in header X-Api-Key"},
		step{"no key", nil, 400, "", "no API key in header X-Api-Key"},
	)
	run(t, url, steps)
	if r := get(t, url, "X-Api-Key", "k-stolen"); strings.Contains(r.body, "k-stolen") {
		t.Fatalf("the refusal echoes the key: %s", r.body)
	}
}

// keyRecorder remembers the keys the middleware decides on (one by one:
// it hides Memory's AllowAll).
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
	l    floodgate.Limiter
}

func (k *keyRecorder) AllowN(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
	k.mu.Lock()
	k.keys = append(k.keys, key)
	k.mu.Unlock()
	return k.l.AllowN(ctx, key, l, cost)
}

// TestTiersKeepPlansApart: a free and a pro client with the same user id
// are counted apart, under keys that say their plan.
func TestTiersKeepPlansApart(t *testing.T) {
	store := &keyRecorder{l: frozenMemory()}
	url := serve(t, store, Options{Tiers: &Tiers{Header: "X-Plan", Plans: map[string][]Rule{
		"free": {{Name: "per-user", Limit: floodgate.PerMinute(1), Key: ByHeader("X-User")}},
		"pro":  {{Name: "per-user", Limit: floodgate.PerMinute(1), Key: ByHeader("X-User")}},
	}}}, nil)
	run(t, url, []step{
		{"free u1", []string{"X-Plan", "free", "X-User", "u1"}, 200, `"free/per-user";q=1;w=60`, ""},
		{"free u1 again", []string{"X-Plan", "free", "X-User", "u1"}, 429, `"free/per-user";q=1;w=60`, ""},
		{"pro u1: another counter", []string{"X-Plan", "pro", "X-User", "u1"}, 200, `"pro/per-user";q=1;w=60`, ""},
	})
	store.mu.Lock()
	defer store.mu.Unlock()
	if want := []string{"free/per-user:u1", "free/per-user:u1", "pro/per-user:u1"}; !slices.Equal(store.keys, want) {
		t.Fatalf("keys %q, want %q", store.keys, want)
	}
}

func TestTiersWithoutAKnownPlan(t *testing.T) {
	fromHeader := func(def string) *Tiers { return &Tiers{Plans: perKeyPlans(), Header: "X-Plan", Default: def} }
	fromTable := func(def string) *Tiers {
		return &Tiers{Plans: perKeyPlans(), APIKeyHeader: "X-Api-Key", APIKeys: map[string]string{"k-pro": "pro"}, Default: def}
	}
	for _, tc := range []struct {
		name  string
		tiers *Tiers
		steps []step
	}{
		{"header, no default: refused", fromHeader(""), []step{
			{"no plan", []string{"X-Api-Key", "k"}, 400, "", "missing plan: no header X-Plan"},
			{"unknown plan", []string{"X-Plan", "gold", "X-Api-Key", "k"}, 403, "", `unknown plan "gold"`},
			{"plan names are case-sensitive", []string{"X-Plan", "Pro", "X-Api-Key", "k"}, 403, "", `unknown plan "Pro"`},
			{"known plan", []string{"X-Plan", "pro", "X-Api-Key", "k"}, 200, proPolicy, ""},
		}},
		{"header, default free", fromHeader("free"), []step{
			{"no plan", []string{"X-Api-Key", "k"}, 200, freePolicy, ""},
			{"unknown plan", []string{"X-Plan", "gold", "X-Api-Key", "k"}, 200, freePolicy, ""},
			{"free used up by both", []string{"X-Plan", "gold", "X-Api-Key", "k"}, 429, freePolicy, ""},
			{"known plan", []string{"X-Plan", "pro", "X-Api-Key", "k"}, 200, proPolicy, ""},
		}},
		{"header, default without rules: unknown plans pass", fromHeader("enterprise"), []step{
			{"no plan", []string{"X-Api-Key", "k"}, 200, "", ""},
			{"unknown plan", []string{"X-Plan", "gold", "X-Api-Key", "k"}, 200, "", ""},
			{"known plan", []string{"X-Plan", "free", "X-Api-Key", "k"}, 200, freePolicy, ""},
		}},
		{"key table, default free", fromTable("free"), []step{
			{"no key: free, shared by all keyless requests", nil, 200, "", ""},
			{"unknown key", []string{"X-Api-Key", "k-new"}, 200, freePolicy, ""},
			{"known key", []string{"X-Api-Key", "k-pro"}, 200, proPolicy, ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Missing: Pass, so that a keyless request on the default plan
			// passes the per-key rule by (no RateLimit fields).
			run(t, serve(t, frozenMemory(), Options{Tiers: tc.tiers, Missing: Pass}, nil), tc.steps)
		})
	}
}

// TestTiersAddToRules: Options.Rules apply to every plan, with one counter
// for all plans; a plan's rules come after them.
func TestTiersAddToRules(t *testing.T) {
	url := serve(t, frozenMemory(), Options{
		Rules: []Rule{{Name: "global", Limit: floodgate.PerMinute(4), Key: Constant("all")}},
		Tiers: &Tiers{Header: "X-Plan", Plans: perKeyPlans()},
	}, nil)
	global := `"global";q=4;w=60`
	run(t, url, []step{
		{"free", []string{"X-Plan", "free", "X-Api-Key", "k"}, 200, global + ", " + freePolicy, ""},
		{"pro", []string{"X-Plan", "pro", "X-Api-Key", "k"}, 200, global + ", " + proPolicy, ""},
		{"enterprise: the global rule only", []string{"X-Plan", "enterprise", "X-Api-Key", "k"}, 200, global, ""},
		{"enterprise again", []string{"X-Plan", "enterprise", "X-Api-Key", "k"}, 200, global, ""},
		{"the global limit counts every plan", []string{"X-Plan", "enterprise", "X-Api-Key", "k"}, 429, global, ""},
	})
}

func TestTiersFromPlanFunc(t *testing.T) {
	// As an authentication middleware in front would hand on a verified
	// claim; here a header stands in for it.
	claim := func(r *http.Request) (string, bool) {
		v := r.Header.Get("X-Verified-Plan")
		return v, v != ""
	}
	url := serve(t, frozenMemory(), Options{Tiers: &Tiers{Plans: perKeyPlans(), Plan: claim}}, nil)
	run(t, url, []step{
		{"pro", []string{"X-Verified-Plan", "pro", "X-Api-Key", "k"}, 200, proPolicy, ""},
		{"none", []string{"X-Api-Key", "k"}, 400, "", "does not say which plan"},
		{"unknown", []string{"X-Verified-Plan", "gold", "X-Api-Key", "k"}, 403, "", `unknown plan "gold"`},
	})
}

// TestTiersReconcileUnderThePlansKey: a plan's reconciled rule corrects
// the plan's counter, not another plan's.
func TestTiersReconcileUnderThePlansKey(t *testing.T) {
	tokens := func(n int64) []Rule {
		r := tokensPerMinute(ActualFromHeader("X-Tokens-Used"))
		r.Limit = floodgate.PerMinute(n)
		return []Rule{r}
	}
	url := serve(t, frozenMemory(), Options{Tiers: &Tiers{Header: "X-Plan", Plans: map[string][]Rule{
		"free": tokens(1000), "pro": tokens(10000),
	}}}, llm("header"))
	if r := get(t, url, "X-Plan", "pro", "X-Api-Key", "k", "X-Max-Tokens", "10", "X-Use", "4000"); r.status != 200 {
		t.Fatal(r.status)
	}
	remaining := func(plan string) int64 {
		r := get(t, url, "X-Plan", plan, "X-Api-Key", "k", "X-Max-Tokens", "0", "X-Use", "0")
		return fields(t, r.header)[plan+"/tpm"]["r"]
	}
	if pro, free := remaining("pro"), remaining("free"); pro != 6000 || free != 1000 {
		t.Fatalf("pro r=%d (want 6000), free r=%d (want 1000)", pro, free)
	}
}

func TestTiersTableIsCopied(t *testing.T) {
	table := map[string]string{"k": "free"}
	url := serve(t, frozenMemory(), Options{Tiers: &Tiers{Plans: perKeyPlans(), APIKeyHeader: "X-Api-Key", APIKeys: table}}, nil)
	table["k"] = "pro"
	table["k2"] = "pro"
	run(t, url, []step{
		{"k stays free", []string{"X-Api-Key", "k"}, 200, freePolicy, ""},
		{"k2 stays unknown", []string{"X-Api-Key", "k2"}, 403, "", "unknown API key"},
	})
}

func TestTiersValidate(t *testing.T) {
	ok := []Rule{{Name: "r", Limit: floodgate.PerMinute(1), Key: Constant("x")}}
	plans := map[string][]Rule{"free": ok, "pro": ok}
	claim := func(*http.Request) (string, bool) { return "", false }
	for _, tc := range []struct {
		name  string
		rules []Rule
		tiers Tiers
		want  string
	}{
		{"no plans", nil, Tiers{Header: "X-Plan"}, "without Plans"},
		{"no rules anywhere", nil, Tiers{Header: "X-Plan", Plans: map[string][]Rule{"free": nil}}, "no rules"},
		{"empty plan name", nil, Tiers{Header: "X-Plan", Plans: map[string][]Rule{"": ok}}, "1 to 64"},
		{"long plan name", nil, Tiers{Header: "X-Plan", Plans: map[string][]Rule{strings.Repeat("p", 65): ok}}, "1 to 64"},
		{"slash in plan name", nil, Tiers{Header: "X-Plan", Plans: map[string][]Rule{"a/b": ok}}, `"a/b" may hold only`},
		{"colon in plan name", nil, Tiers{Header: "X-Plan", Plans: map[string][]Rule{"a:b": ok}}, `"a:b" may hold only`},
		{"no source", nil, Tiers{Plans: plans}, "exactly one source of plans"},
		{"header and key table", nil, Tiers{Plans: plans, Header: "X-Plan", APIKeyHeader: "X-Api-Key", APIKeys: map[string]string{"k": "pro"}},
			"never from a header the client can write"},
		{"header and func", nil, Tiers{Plans: plans, Header: "X-Plan", Plan: claim}, "got 2"},
		{"key table without its header", nil, Tiers{Plans: plans, APIKeys: map[string]string{"k": "pro"}}, "empty APIKeyHeader"},
		{"key header without a table", nil, Tiers{Plans: plans, APIKeyHeader: "X-Api-Key"}, "APIKeyHeader without APIKeys"},
		{"empty API key", nil, Tiers{Plans: plans, APIKeyHeader: "X-Api-Key", APIKeys: map[string]string{"": "pro"}}, "empty key"},
		{"key of an unknown plan", nil, Tiers{Plans: plans, APIKeyHeader: "X-Api-Key", APIKeys: map[string]string{"secret-key": "gold"}},
			`plan "gold", which is not in Plans`},
		{"bad header name", nil, Tiers{Plans: plans, Header: "X Plan"}, `Header "X Plan" is not a valid header name`},
		{"bad key header name", nil, Tiers{Plans: plans, APIKeyHeader: "X-Api-Key:", APIKeys: map[string]string{"k": "pro"}}, "not a valid header name"},
		{"unknown default", nil, Tiers{Plans: plans, Header: "X-Plan", Default: "gold"}, `Default plan "gold" is not in Plans`},
		{"bad rule in a plan", nil, Tiers{Plans: map[string][]Rule{"pro": {{Name: "r", Limit: ok[0].Limit}}}, Header: "X-Plan"},
			`plan "pro" rule 0 ("r"): nil Key`},
		{"plan rule clashes with a rule", []Rule{{Name: "pro/r", Limit: ok[0].Limit, Key: Constant("x")}}, Tiers{Plans: plans, Header: "X-Plan"},
			`rule 0 and plan "pro" rule 0 are both named "pro/r"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(frozenMemory(), Options{Rules: tc.rules, Tiers: &tc.tiers})
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-key") {
				t.Fatalf("the error reveals an API key: %v", err)
			}
		})
	}
}
