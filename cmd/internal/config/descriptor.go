package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

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

// descriptorSpec is a descriptor as written: its fields decoded, its
// limits, metadata and children waiting for the checks that need them all.
type descriptorSpec struct {
	policy.Node
	shadow, quota, detailed bool
	rateLimit, rateLimits   *yaml.Node // nil when not given (or null)
	children, metadata      *yaml.Node
}

// descriptorFields is the schema of a descriptor. Key and value are read
// first, by descriptorName: they name the descriptor in every other error.
var descriptorFields = []fieldOf[descriptorSpec]{
	{"key", ignored[descriptorSpec]},
	{"value", ignored[descriptorSpec]},
	{"rate_limit", nodeInto(func(s *descriptorSpec) **yaml.Node { return &s.rateLimit })},
	{"rate_limits", nodeInto(func(s *descriptorSpec) **yaml.Node { return &s.rateLimits })},
	{"descriptors", nodeInto(func(s *descriptorSpec) **yaml.Node { return &s.children })},
	{"shadow_mode", boolInto(func(s *descriptorSpec) *bool { return &s.shadow })},
	{"quota_mode", boolInto(func(s *descriptorSpec) *bool { return &s.quota })},
	{"detailed_metric", boolInto(func(s *descriptorSpec) *bool { return &s.detailed })},
	{"value_to_metric", boolInto(func(s *descriptorSpec) *bool { return &s.ValueToMetric })},
	{"share_threshold", boolInto(func(s *descriptorSpec) *bool { return &s.ShareThreshold })},
	{"metadata", nodeInto(func(s *descriptorSpec) **yaml.Node { return &s.metadata })},
}

// descriptor reads one descriptor and what is under it. seen holds the
// keys and values of the descriptors before it at its level.
func (d *decoder) descriptor(n *yaml.Node, parent string, index int, seen map[policy.Entry]bool) (*policy.Node, error) {
	where := within(parent, fmt.Sprintf("descriptors[%d]", index))
	fs, err := d.fields(n, where)
	if err != nil {
		return nil, err
	}
	var s descriptorSpec
	if s.Key, s.Value, err = d.descriptorName(n, fs, where); err != nil {
		return nil, err
	}
	path := policy.JoinPath(parent, s.Key, s.Value)
	ctx := fmt.Sprintf("descriptor %q", path)
	given, err := decodeFields(d, fs, ctx, descriptorFields, &s)
	if err != nil {
		return nil, err
	}
	if err := d.checkDescriptor(n, &s, given, ctx, seen); err != nil {
		return nil, err
	}
	nd := s.Node
	if nd.Rules, err = d.rules(&s, given, ctx); err != nil {
		return nil, err
	}
	if s.children != nil {
		if nd.Children, err = d.descriptors(s.children, path); err != nil {
			return nil, err
		}
	}
	return &nd, nil
}

// descriptorName reads a descriptor's key, required, and value.
func (d *decoder) descriptorName(n *yaml.Node, fs []field, where string) (key, value string, err error) {
	for _, f := range fs {
		switch f.name {
		case "key":
			key, err = d.str(f.value, f.what(where))
		case "value":
			value, err = d.str(f.value, f.what(where))
		}
		if err != nil {
			return "", "", err
		}
	}
	if key == "" {
		return "", "", d.errorf(n, "%s: key is required and must not be empty", where)
	}
	return key, value, nil
}

// checkDescriptor refuses share_threshold without a wildcard and a
// descriptor that another at its level already is.
func (d *decoder) checkDescriptor(n *yaml.Node, s *descriptorSpec, given map[string]*yaml.Node, ctx string, seen map[policy.Entry]bool) error {
	if s.ShareThreshold && !strings.Contains(s.Key+s.Value, "*") {
		return d.errorf(given["share_threshold"], "%s: share_threshold needs a wildcard value (one with a \"*\")", ctx)
	}
	entry := policy.Entry{Key: s.Key, Value: s.Value}
	switch {
	case seen[entry] && s.Value == "":
		return d.errorf(n, "%s: duplicate descriptor: key %q without a value is already defined at this level", ctx, s.Key)
	case seen[entry]:
		return d.errorf(n, "%s: duplicate descriptor: key %q with value %q is already defined at this level", ctx, s.Key, s.Value)
	}
	seen[entry] = true
	return nil
}

// rules reads a descriptor's rate_limit or rate_limits, each a rule with
// the descriptor's modes and metadata.
func (d *decoder) rules(s *descriptorSpec, given map[string]*yaml.Node, ctx string) ([]policy.Rule, error) {
	meta, err := d.metadata(s.metadata, ctx)
	if err != nil {
		return nil, err
	}
	specs, labels, err := d.limitNodes(s, given, ctx)
	if err != nil {
		return nil, err
	}
	var rules []policy.Rule
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
		r.ShadowMode, r.QuotaMode, r.DetailedMetric = s.shadow, s.quota, s.detailed
		r.Metadata = meta
		rules = append(rules, r)
	}
	return rules, nil
}

// limitNodes are the limits of a descriptor, with their names for errors:
// "rate_limit", or "rate_limits[i]".
func (d *decoder) limitNodes(s *descriptorSpec, given map[string]*yaml.Node, ctx string) ([]*yaml.Node, []string, error) {
	switch {
	case s.rateLimit != nil && s.rateLimits != nil:
		return nil, nil, d.errorf(given["rate_limits"], "%s: give rate_limit or rate_limits, not both", ctx)
	case s.rateLimit != nil:
		return []*yaml.Node{s.rateLimit}, []string{"rate_limit"}, nil
	case s.rateLimits == nil:
		return nil, nil, nil
	}
	specs, err := d.items(s.rateLimits, ctx+": rate_limits")
	if err != nil {
		return nil, nil, err
	}
	if len(specs) == 0 {
		return nil, nil, d.errorf(s.rateLimits, "%s: rate_limits is empty: remove it or give at least one limit", ctx)
	}
	labels := make([]string, len(specs))
	for i := range specs {
		labels[i] = fmt.Sprintf("rate_limits[%d]", i)
	}
	return specs, labels, nil
}

// metadata reads a descriptor's metadata mapping into plain Go values; nil
// n is none.
func (d *decoder) metadata(n *yaml.Node, ctx string) (map[string]any, error) {
	if n == nil {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errorf(n, "%s: metadata must be a mapping, not %s", ctx, kindName(n))
	}
	v, err := d.anyValue(n, ctx+": metadata")
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}
