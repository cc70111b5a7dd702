package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
)

// Units are Envoy's, with its lengths: a month is 30 days, a year 365.
var units = []struct {
	name   string
	period time.Duration
}{
	{"second", time.Second},
	{"minute", time.Minute},
	{"hour", time.Hour},
	{"day", 24 * time.Hour},
	{"week", 7 * 24 * time.Hour},
	{"month", 30 * 24 * time.Hour},
	{"year", 365 * 24 * time.Hour},
}

func unitPeriod(s string) (time.Duration, bool) {
	for _, u := range units {
		if strings.EqualFold(s, u.name) {
			return u.period, true
		}
	}
	return 0, false
}

func unitNames() string {
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.name
	}
	return strings.Join(names, ", ")
}

// limitSpec is a rate_limit as written: the rule's own fields decoded, the
// numbers of its Limit waiting for the checks across fields.
type limitSpec struct {
	rule        policy.Rule
	rate, burst int64
	period      time.Duration
	noUnit      bool // unit given empty, which is as if not given
}

// limitFields is the schema of a rate_limit.
var limitFields = []fieldOf[limitSpec]{
	{"unit", (*decoder).unitField},
	{"requests_per_unit", intInto(func(s *limitSpec) *int64 { return &s.rate })},
	{"unlimited", boolInto(func(s *limitSpec) *bool { return &s.rule.Unlimited })},
	{"name", strInto(func(s *limitSpec) *string { return &s.rule.Name })},
	{"replaces", func(d *decoder, f field, ctx string, s *limitSpec) (err error) {
		s.rule.Replaces, err = d.replaces(f.value, f.what(ctx))
		return err
	}},
	{"algorithm", (*decoder).algorithmField},
	{"burst", intInto(func(s *limitSpec) *int64 { return &s.burst })},
	{"period", func(d *decoder, f field, ctx string, s *limitSpec) (err error) {
		s.period, err = d.positiveDuration(f.value, f.what(ctx))
		return err
	}},
	{"failure_mode", (*decoder).failureModeField},
	{"strategy", func(d *decoder, f field, ctx string, s *limitSpec) (err error) {
		s.rule.Strategy, s.rule.StrategyParams, err = d.strategy(f.value, f.what(ctx))
		return err
	}},
	{"counts", func(d *decoder, f field, ctx string, s *limitSpec) (err error) {
		s.rule.Counts, err = d.counts(f.value, f.what(ctx))
		return err
	}},
}

func (d *decoder) unitField(f field, ctx string, s *limitSpec) error {
	unit, err := d.str(f.value, f.what(ctx))
	if err != nil {
		return err
	}
	var ok bool
	if s.period, ok = unitPeriod(unit); !ok && unit != "" {
		return d.errorf(f.value, "%s: invalid unit %q (want one of %s)", ctx, unit, unitNames())
	}
	s.noUnit = unit == ""
	return nil
}

func (d *decoder) algorithmField(f field, ctx string, s *limitSpec) error {
	name, err := d.str(f.value, f.what(ctx))
	if err != nil {
		return err
	}
	s.rule.Limit.Algorithm = floodgate.Algorithm(name)
	if !slices.Contains(floodgate.Algorithms(), s.rule.Limit.Algorithm) {
		return d.errorf(f.value, "%s: unknown algorithm %q (want one of %s)", ctx, name, joinNames(floodgate.Algorithms()))
	}
	return nil
}

func (d *decoder) failureModeField(f field, ctx string, s *limitSpec) error {
	name, err := d.str(f.value, f.what(ctx))
	if err != nil {
		return err
	}
	if s.rule.FailureMode, err = failover.ParseMode(name); err != nil {
		return d.errorf(f.value, "%s: unknown failure_mode %q (want one of %s)", ctx, name, joinNames(failover.Modes()))
	}
	return nil
}

// limit reads one rate_limit. ctx names it in errors.
func (d *decoder) limit(n *yaml.Node, ctx string) (policy.Rule, error) {
	fs, err := d.fields(n, ctx)
	if err != nil {
		return policy.Rule{}, err
	}
	s := limitSpec{rule: policy.Rule{Line: n.Line}}
	given, err := decodeFields(d, fs, ctx, limitFields, &s)
	if err != nil {
		return policy.Rule{}, err
	}
	if s.noUnit {
		delete(given, "unit")
	}
	if s.rule.Name != "" && slices.Contains(s.rule.Replaces, s.rule.Name) {
		return policy.Rule{}, d.errorf(given["replaces"], "%s: limit %q replaces itself", ctx, s.rule.Name)
	}
	if s.rule.Unlimited {
		return d.unlimited(s.rule, given, ctx)
	}
	return d.limited(n, s, given, ctx)
}

// unlimited is an unlimited rule, which gives no counting field.
func (d *decoder) unlimited(r policy.Rule, given map[string]*yaml.Node, ctx string) (policy.Rule, error) {
	for _, f := range []string{"unit", "period", "requests_per_unit", "algorithm", "burst", "failure_mode", "strategy", "counts"} {
		if k := given[f]; k != nil {
			return policy.Rule{}, d.errorf(k, "%s: %s must not be set on an unlimited limit", ctx, f)
		}
	}
	r.Limit = floodgate.Limit{}
	return r, nil
}

// limited completes a rule that limits: its unit or period and rate are
// required, the defaults filled in, and its Limit valid.
func (d *decoder) limited(n *yaml.Node, s limitSpec, given map[string]*yaml.Node, ctx string) (policy.Rule, error) {
	r := s.rule
	switch {
	case given["unit"] != nil && given["period"] != nil:
		return r, d.errorf(given["period"], "%s: give unit or period, not both", ctx)
	case given["unit"] == nil && given["period"] == nil:
		return r, d.errorf(n, "%s: a unit (%s) or a period is required, or unlimited: true", ctx, unitNames())
	case given["requests_per_unit"] == nil:
		return r, d.errorf(n, "%s: requests_per_unit is required (0 denies every request)", ctx)
	}
	if r.Limit.Algorithm == "" {
		r.Limit.Algorithm = floodgate.FixedWindow
	}
	if r.Counts == "" {
		r.Counts = policy.CountsUnits
	}
	if given["burst"] != nil && !isBucket(r.Limit.Algorithm) {
		return r, d.errorf(given["burst"], "%s: burst applies to %s and %s only, not to %s",
			ctx, floodgate.TokenBucket, floodgate.LeakyBucket, r.Limit.Algorithm)
	}
	r.Limit.Rate, r.Limit.Period, r.Limit.Burst = s.rate, s.period, s.burst
	return r, d.validLimit(n, r.Limit, given, ctx)
}

// validLimit checks a limit as the engine will. A rate of 0 denies every
// request; the rest of the limit must still make sense.
func (d *decoder) validLimit(n *yaml.Node, l floodgate.Limit, given map[string]*yaml.Node, ctx string) error {
	if l.Rate == 0 {
		if l.Burst != 0 {
			return d.errorf(given["burst"], "%s: burst needs a requests_per_unit above 0", ctx)
		}
		l.Rate = 1
	}
	err := l.Validate()
	if err == nil {
		return nil
	}
	at := n
	if k := given["period"]; k != nil {
		at = k
	}
	msg := strings.TrimPrefix(err.Error(), floodgate.ErrInvalidLimit.Error()+": ")
	return &Error{File: d.file, Line: at.Line, Msg: fmt.Sprintf("%s: invalid limit: %s", ctx, msg), Err: err}
}

// counts reads what a limit counts: requests or units.
func (d *decoder) counts(n *yaml.Node, what string) (policy.Counts, error) {
	s, err := d.str(n, what)
	if err != nil {
		return "", err
	}
	if !slices.Contains(policy.CountsKinds(), policy.Counts(s)) {
		return "", d.errorf(n, "%s: %q is not a kind of count: want requests (1 per request) or units (the request's cost)", what, s)
	}
	return policy.Counts(s), nil
}

// replaces reads a list of {name: other}.
func (d *decoder) replaces(n *yaml.Node, ctx string) ([]string, error) {
	items, err := d.items(n, ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		what := fmt.Sprintf("%s[%d]", ctx, i)
		fs, err := d.fields(item, what)
		if err != nil {
			return nil, err
		}
		name := ""
		for _, f := range fs {
			if f.name != "name" {
				return nil, d.unknown(f, what, []string{"name"})
			}
			if name, err = d.str(f.value, what+": name"); err != nil {
				return nil, err
			}
		}
		if name == "" {
			return nil, d.errorf(item, "%s: name is required and must not be empty", what)
		}
		out = append(out, name)
	}
	return out, nil
}

func isBucket(a floodgate.Algorithm) bool {
	return a == floodgate.TokenBucket || a == floodgate.LeakyBucket
}
