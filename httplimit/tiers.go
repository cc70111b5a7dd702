package httplimit

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// Tiers gives each plan (free, pro, enterprise) its own rules, as the
// descriptors of a policy file do: the plan of a request picks which
// limits apply to it, on top of Options.Rules.
//
// A request's plan comes from exactly one source: Header, APIKeys or Plan.
// A request without a plan (no header, no API key, Plan says none) or with
// one that is not in Plans (an unknown plan name or API key) is on the
// Default plan; without a Default it is refused, with 400 Bad Request when
// it has no plan and 403 Forbidden when its plan or key is unknown. This
// mirrors Missing: no Default is Deny; a Default plan without rules is
// Pass; a Default plan whose rules key by Constant is Shared.
type Tiers struct {
	// Plans maps each plan's name to its rules. A plan name is 1 to 64
	// letters, digits, '.', '_' or '-'. A plan's rule is named plan/Name
	// ("pro/per-key") in the RateLimit fields and in its keys, so a free
	// and a pro client with the same key value have separate counters.
	// A plan without rules is limited by Options.Rules alone.
	Plans map[string][]Rule
	// Header names a request header that holds the plan's name. Any client
	// can write a header: use it only when a proxy you control sets it
	// (after authenticating the client) and drops what the client sent.
	Header string
	// APIKeys is a static table from API key to plan name; APIKeyHeader
	// names the request header that carries the key. The plan then comes
	// from the table only: a plan header sent by the client is ignored. New
	// copies the table, so later changes to the map have no effect.
	APIKeys      map[string]string
	APIKeyHeader string
	// Plan, for plans found elsewhere (a verified token's claim), returns
	// the request's plan, or false when it has none.
	Plan PlanFunc
	// Default is the plan of requests without a known plan; "" refuses them.
	Default string
}

// PlanFunc says which plan a request is on; ok is false when it has none.
type PlanFunc func(r *http.Request) (plan string, ok bool)

// maxPlanName bounds plan names, which appear in every key and header.
const maxPlanName = 64

// planTable is validated Tiers: each plan's rules, after Options.Rules.
type planTable struct {
	source func(r *http.Request) (plan string, status int, detail string)
	plans  map[string][]rule
	// fallback is the Default plan; "" refuses requests without a known
	// plan.
	fallback string
}

// pick returns the rules for r's plan, or the status and detail to refuse
// r with (status 0 when r may go on).
func (t *planTable) pick(r *http.Request) ([]rule, int, string) {
	plan, status, detail := t.source(r)
	if status == 0 {
		rules, ok := t.plans[plan]
		if ok {
			return rules, 0, ""
		}
		status, detail = http.StatusForbidden, "unknown plan "+excerpt.Quote(plan)
	}
	if t.fallback != "" {
		return t.plans[t.fallback], 0, ""
	}
	return nil, status, detail
}

// sets lists every plan's rules, for checks over all rules.
func (t *planTable) sets() [][]rule {
	var out [][]rule
	for _, name := range slices.Sorted(maps.Keys(t.plans)) {
		out = append(out, t.plans[name])
	}
	return out
}

// compileTiers validates tiers and gives each plan its full rule list:
// base (Options.Rules, already compiled) followed by the plan's own. names
// is as for compileRules. nil tiers give a nil table.
func compileTiers(tiers *Tiers, base []rule, names map[string]string) (*planTable, error) {
	if tiers == nil {
		return nil, nil
	}
	if len(tiers.Plans) == 0 {
		return nil, fmt.Errorf("%w: Tiers without Plans", ErrInvalidOptions)
	}
	t := &planTable{plans: make(map[string][]rule, len(tiers.Plans))}
	for _, name := range slices.Sorted(maps.Keys(tiers.Plans)) { // sorted: the same error every time
		if err := checkPlanName(name); err != nil {
			return nil, err
		}
		own, err := compileRules(tiers.Plans[name], name, names)
		if err != nil {
			return nil, err
		}
		t.plans[name] = append(slices.Clip(base), own...)
	}
	if _, ok := t.plans[tiers.Default]; !ok && tiers.Default != "" {
		return nil, fmt.Errorf("%w: Tiers: Default plan %q is not in Plans", ErrInvalidOptions, tiers.Default)
	}
	t.fallback = tiers.Default
	source, err := planSource(tiers)
	if err != nil {
		return nil, err
	}
	t.source = source
	return t, nil
}

// checkPlanName accepts 1 to maxPlanName of A-Z a-z 0-9 . _ -, which keep
// keys and RateLimit fields readable and cannot contain the ':' and '/'
// that separate the parts of a key.
func checkPlanName(name string) error {
	if name == "" || len(name) > maxPlanName {
		return fmt.Errorf("%w: Tiers: plan name %s must have 1 to %d characters", ErrInvalidOptions, excerpt.Quote(name), maxPlanName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: Tiers: plan name %q may hold only letters, digits, '.', '_' and '-'", ErrInvalidOptions, name)
		}
	}
	return nil
}

// planSource validates the one source of plans Tiers names and returns it.
func planSource(tiers *Tiers) (func(*http.Request) (string, int, string), error) {
	n := 0
	for _, set := range []bool{tiers.Header != "", tiers.APIKeys != nil || tiers.APIKeyHeader != "", tiers.Plan != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: Tiers needs exactly one source of plans (Header, APIKeys with APIKeyHeader, or Plan), got %d; "+
			"with an API key table the plan must come from the table, never from a header the client can write", ErrInvalidOptions, n)
	}
	switch {
	case tiers.Header != "":
		return planFromHeader(tiers.Header)
	case tiers.Plan != nil:
		return planFromFunc(tiers.Plan), nil
	default:
		return planFromAPIKeys(tiers.APIKeyHeader, tiers.APIKeys, tiers.Plans)
	}
}

func planFromHeader(header string) (func(*http.Request) (string, int, string), error) {
	if err := checkFieldName("Header", header); err != nil {
		return nil, err
	}
	header = http.CanonicalHeaderKey(header)
	return func(r *http.Request) (string, int, string) {
		if v := r.Header.Get(header); v != "" {
			return v, 0, ""
		}
		return "", http.StatusBadRequest, "missing plan: no header " + header
	}, nil
}

func planFromFunc(f PlanFunc) func(*http.Request) (string, int, string) {
	return func(r *http.Request) (string, int, string) {
		if plan, ok := f(r); ok {
			return plan, 0, ""
		}
		return "", http.StatusBadRequest, "missing plan: the request does not say which plan it is on"
	}
}

// planFromAPIKeys looks the request's API key up in a copy of table. Its
// errors name plans but never a key: keys are secrets.
func planFromAPIKeys(header string, table map[string]string, plans map[string][]Rule) (func(*http.Request) (string, int, string), error) {
	if err := checkFieldName("APIKeyHeader", header); err != nil {
		return nil, err
	}
	if len(table) == 0 {
		return nil, fmt.Errorf("%w: Tiers: APIKeyHeader without APIKeys", ErrInvalidOptions)
	}
	keys := maps.Clone(table)
	for _, key := range slices.Sorted(maps.Keys(keys)) { // sorted: the same error every time
		plan := keys[key]
		if key == "" {
			return nil, fmt.Errorf("%w: Tiers: APIKeys has an empty key", ErrInvalidOptions)
		}
		if _, ok := plans[plan]; !ok {
			return nil, fmt.Errorf("%w: Tiers: APIKeys maps a key to plan %q, which is not in Plans", ErrInvalidOptions, plan)
		}
	}
	header = http.CanonicalHeaderKey(header)
	return func(r *http.Request) (string, int, string) {
		key := r.Header.Get(header)
		if key == "" {
			return "", http.StatusBadRequest, "missing plan: no API key in header " + header
		}
		if plan, ok := keys[key]; ok {
			return plan, 0, ""
		}
		return "", http.StatusForbidden, "unknown API key in header " + header
	}, nil
}

// checkFieldName accepts an HTTP field name (an RFC 9110 token).
func checkFieldName(option, name string) error {
	if name == "" {
		return fmt.Errorf("%w: Tiers: empty %s", ErrInvalidOptions, option)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return fmt.Errorf("%w: Tiers: %s %s is not a valid header name", ErrInvalidOptions, option, excerpt.Quote(name))
		}
	}
	return nil
}
