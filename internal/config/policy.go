package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/policy"
)

// Parse reads one file. name is how errors refer to it, usually its path.
func Parse(name string, data []byte) (*policy.Policy, error) {
	d, doc, err := read(name, data)
	if err != nil {
		return nil, err
	}
	f, err := d.document(doc)
	if err != nil {
		return nil, err
	}
	return d.build(f)
}

// read parses the one YAML document of a file.
func read(name string, data []byte) (*decoder, *yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decodeYAML(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, &Error{File: name, Msg: "empty file: want a domain and its descriptors"}
		}
		return nil, nil, syntaxError(name, err)
	}
	var extra yaml.Node
	switch err := decodeYAML(dec, &extra); {
	case err == nil:
		return nil, nil, &Error{File: name, Line: extra.Line,
			Msg: "a second YAML document: a file holds one domain, put each in its own file"}
	case !errors.Is(err, io.EOF):
		return nil, nil, syntaxError(name, err)
	}
	return &decoder{file: name, budget: nodeBudget(len(data))}, &doc, nil
}

// decodeYAML reads the next document, turning a panic of the YAML library
// into an error so that no input can crash the loader.
func decodeYAML(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

// document is a file with its descriptors decoded; its routes need the
// domain's matcher to be checked, so they wait for build.
type document struct {
	domain          string
	domainLine      int
	tree            []*policy.Node
	routes, trusted *yaml.Node // nil when not given
}

func (d *decoder) document(doc *yaml.Node) (document, error) {
	var f document
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return f, d.errorf(doc, "empty file: want a domain and its descriptors")
		}
		root = doc.Content[0]
	}
	if r, err := d.resolve(root); err == nil && isNull(r) {
		return f, d.errorf(r, "empty file: want a domain and its descriptors")
	}
	fs, err := d.fields(root, "the file")
	if err != nil {
		return f, err
	}
	var descriptors *yaml.Node
	for _, fl := range fs {
		switch fl.name {
		case "domain":
			if f.domain, err = d.str(fl.value, "domain"); err != nil {
				return f, err
			}
			f.domainLine = fl.key.Line
		case "descriptors":
			descriptors = fl.value
		case "routes":
			f.routes = fl.value
		case "trusted_proxies":
			f.trusted = fl.value
		default:
			return f, d.unknown(fl, "", topFields)
		}
	}
	if f.domain == "" {
		return f, d.errorf(root, "domain is required and must not be empty")
	}
	if descriptors != nil {
		f.tree, err = d.descriptors(descriptors, "")
	}
	return f, err
}

// build makes the policy of a document, reading its routes against it.
func (d *decoder) build(f document) (*policy.Policy, error) {
	p := policy.New(f.domain, d.file, f.domainLine, f.tree)
	switch {
	case f.routes != nil:
		return d.routes(f.routes, f.trusted, p)
	case f.trusted != nil:
		return nil, d.errorf(f.trusted, "trusted_proxies applies to routes, and this file has none")
	}
	return p, nil
}

var (
	topFields        = []string{"domain", "descriptors", "routes", "trusted_proxies"}
	descriptorFields = []string{"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode",
		"quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata"}
	limitFields = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "burst", "period", "failure_mode", "strategy", "counts"}
)

// unknown is the error for a field the language does not have, with a
// suggestion when it looks like a misspelling.
func (d *decoder) unknown(f field, context string, known []string) *Error {
	msg := fmt.Sprintf("unknown field %q", f.name)
	if s := suggest(f.name, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	if context != "" {
		msg = context + ": " + msg
	}
	return d.errorf(f.key, "%s", msg)
}

// descriptors reads a list of descriptors under the one at parent, the
// Envoy-style path of the parent descriptor under the domain
// ("tenant_free"; "" at the top).
func (d *decoder) descriptors(n *yaml.Node, parent string) ([]*policy.Node, error) {
	items, err := d.items(n, within(parent, "descriptors"))
	if err != nil {
		return nil, err
	}
	var out []*policy.Node
	seen := map[policy.Entry]bool{} // key-only descriptors with Value ""
	for i, item := range items {
		nd, err := d.descriptor(item, parent, i, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, nd)
	}
	return out, nil
}

// within names something inside the descriptor at path, for errors.
func within(path, what string) string {
	if path == "" {
		return what
	}
	return fmt.Sprintf("descriptor %q: %s", path, what)
}

func (d *decoder) descriptor(n *yaml.Node, parent string, index int, seen map[policy.Entry]bool) (*policy.Node, error) {
	where := within(parent, fmt.Sprintf("descriptors[%d]", index))
	fs, err := d.fields(n, where)
	if err != nil {
		return nil, err
	}
	nd := &policy.Node{}
	// The key and value first: they name the descriptor in every other error.
	for _, f := range fs {
		switch f.name {
		case "key":
			if nd.Key, err = d.str(f.value, where+": key"); err != nil {
				return nil, err
			}
		case "value":
			if nd.Value, err = d.str(f.value, where+": value"); err != nil {
				return nil, err
			}
		}
	}
	if nd.Key == "" {
		return nil, d.errorf(n, "%s: key is required and must not be empty", where)
	}
	path := policy.JoinPath(parent, nd.Key, nd.Value)
	ctx := fmt.Sprintf("descriptor %q", path)

	var limitNode, limitsNode, children, metadata *yaml.Node
	var limitsKey, shareKey *yaml.Node
	var shadow, quota, detailed bool
	for _, f := range fs {
		switch f.name {
		case "key", "value":
		case "rate_limit":
			if !isNull(f.value) {
				limitNode = f.value
			}
		case "rate_limits":
			if !isNull(f.value) {
				limitsNode, limitsKey = f.value, f.key
			}
		case "descriptors":
			children = f.value
		case "shadow_mode":
			shadow, err = d.boolean(f.value, ctx+": shadow_mode")
		case "quota_mode":
			quota, err = d.boolean(f.value, ctx+": quota_mode")
		case "detailed_metric":
			detailed, err = d.boolean(f.value, ctx+": detailed_metric")
		case "value_to_metric":
			nd.ValueToMetric, err = d.boolean(f.value, ctx+": value_to_metric")
		case "share_threshold":
			nd.ShareThreshold, err = d.boolean(f.value, ctx+": share_threshold")
			shareKey = f.key
		case "metadata":
			if !isNull(f.value) {
				metadata = f.value
			}
		default:
			return nil, d.unknown(f, ctx, descriptorFields)
		}
		if err != nil {
			return nil, err
		}
	}

	if nd.ShareThreshold && !strings.HasSuffix(nd.Value, "*") {
		return nil, d.errorf(shareKey, "%s: share_threshold needs a wildcard value (one ending in \"*\")", ctx)
	}
	switch entry := (policy.Entry{Key: nd.Key, Value: nd.Value}); {
	case seen[entry] && nd.Value == "":
		return nil, d.errorf(n, "%s: duplicate descriptor: key %q without a value is already defined at this level", ctx, nd.Key)
	case seen[entry]:
		return nil, d.errorf(n, "%s: duplicate descriptor: key %q with value %q is already defined at this level", ctx, nd.Key, nd.Value)
	default:
		seen[entry] = true
	}

	var meta map[string]any
	if metadata != nil {
		if metadata.Kind != yaml.MappingNode {
			return nil, d.errorf(metadata, "%s: metadata must be a mapping, not %s", ctx, kindName(metadata))
		}
		v, err := d.anyValue(metadata, ctx+": metadata")
		if err != nil {
			return nil, err
		}
		meta = v.(map[string]any)
	}

	var specs []*yaml.Node
	var labels []string
	switch {
	case limitNode != nil && limitsNode != nil:
		return nil, d.errorf(limitsKey, "%s: give rate_limit or rate_limits, not both", ctx)
	case limitNode != nil:
		specs, labels = []*yaml.Node{limitNode}, []string{"rate_limit"}
	case limitsNode != nil:
		if specs, err = d.items(limitsNode, ctx+": rate_limits"); err != nil {
			return nil, err
		}
		if len(specs) == 0 {
			return nil, d.errorf(limitsNode, "%s: rate_limits is empty: remove it or give at least one limit", ctx)
		}
		for i := range specs {
			labels = append(labels, fmt.Sprintf("rate_limits[%d]", i))
		}
	}
	names := map[string]bool{}
	for i, spec := range specs {
		r, err := d.limit(spec, ctx+": "+labels[i])
		if err != nil {
			return nil, err
		}
		if r.Name != "" {
			if names[r.Name] {
				return nil, d.errorf(spec, "%s: %s: name %q is used by another limit of this descriptor", ctx, labels[i], r.Name)
			}
			names[r.Name] = true
		}
		r.ShadowMode, r.QuotaMode, r.DetailedMetric = shadow, quota, detailed
		r.Metadata = meta
		nd.Rules = append(nd.Rules, r)
	}

	if children != nil {
		if nd.Children, err = d.descriptors(children, path); err != nil {
			return nil, err
		}
	}
	return nd, nil
}

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

// limit reads one rate_limit. ctx names it in errors.
func (d *decoder) limit(n *yaml.Node, ctx string) (policy.Rule, error) {
	fs, err := d.fields(n, ctx)
	if err != nil {
		return policy.Rule{}, err
	}
	r := policy.Rule{Line: n.Line}
	given := map[string]*yaml.Node{}
	var rate, burst int64
	var period time.Duration
	for _, f := range fs {
		given[f.name] = f.key
		v := f.value
		switch f.name {
		case "unit":
			var s string
			if s, err = d.str(v, ctx+": unit"); err == nil {
				var ok bool
				if period, ok = unitPeriod(s); !ok && s != "" {
					return r, d.errorf(v, "%s: invalid unit %q (want one of %s)", ctx, s, unitNames())
				}
				if s == "" {
					delete(given, "unit")
				}
			}
		case "requests_per_unit":
			rate, err = d.integer(v, ctx+": requests_per_unit")
		case "unlimited":
			r.Unlimited, err = d.boolean(v, ctx+": unlimited")
		case "name":
			r.Name, err = d.str(v, ctx+": name")
		case "replaces":
			r.Replaces, err = d.replaces(v, ctx+": replaces")
		case "algorithm":
			var s string
			if s, err = d.str(v, ctx+": algorithm"); err == nil {
				r.Limit.Algorithm = floodgate.Algorithm(s)
				if !slices.Contains(floodgate.Algorithms(), r.Limit.Algorithm) {
					return r, d.errorf(v, "%s: unknown algorithm %q (want one of %s)", ctx, s, joinNames(floodgate.Algorithms()))
				}
			}
		case "burst":
			burst, err = d.integer(v, ctx+": burst")
		case "period":
			period, err = d.positiveDuration(v, ctx+": period")
		case "failure_mode":
			var s string
			if s, err = d.str(v, ctx+": failure_mode"); err == nil {
				if r.FailureMode, err = failover.ParseMode(s); err != nil {
					return r, d.errorf(v, "%s: unknown failure_mode %q (want one of %s)", ctx, s, joinNames(failover.Modes()))
				}
			}
		case "strategy":
			r.Strategy, r.StrategyParams, err = d.strategy(v, ctx+": strategy")
		case "counts":
			r.Counts, err = d.counts(v, ctx+": counts")
		default:
			return r, d.unknown(f, ctx, limitFields)
		}
		if err != nil {
			return r, err
		}
	}

	for _, name := range r.Replaces {
		if r.Name != "" && name == r.Name {
			return r, d.errorf(given["replaces"], "%s: limit %q replaces itself", ctx, name)
		}
	}
	if r.Unlimited {
		for _, f := range []string{"unit", "period", "requests_per_unit", "algorithm", "burst", "failure_mode", "strategy", "counts"} {
			if k := given[f]; k != nil {
				return r, d.errorf(k, "%s: %s must not be set on an unlimited limit", ctx, f)
			}
		}
		r.Limit = floodgate.Limit{}
		return r, nil
	}
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
	r.Limit.Rate, r.Limit.Period, r.Limit.Burst = rate, period, burst
	check := r.Limit
	if rate == 0 {
		// Denies everything; the rest of the limit must still make sense.
		if burst != 0 {
			return r, d.errorf(given["burst"], "%s: burst needs a requests_per_unit above 0", ctx)
		}
		check.Rate = 1
	}
	if err := check.Validate(); err != nil {
		at := n
		if k := given["period"]; k != nil {
			at = k
		}
		msg := strings.TrimPrefix(err.Error(), floodgate.ErrInvalidLimit.Error()+": ")
		return r, &Error{File: d.file, Line: at.Line, Msg: fmt.Sprintf("%s: invalid limit: %s", ctx, msg), Err: err}
	}
	return r, nil
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

func joinNames[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// suggest returns the known name closest to s if it is a likely misspelling.
func suggest(s string, known []string) string {
	norm := func(x string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(x)) }
	best, bestDist := "", 3
	for _, k := range known {
		if norm(k) == norm(s) {
			return k
		}
		if dist := editDistance(s, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
