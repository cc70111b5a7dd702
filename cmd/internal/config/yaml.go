package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// nodeBudget bounds the nodes a file of n bytes may expand to through
// aliases, so that a small file of nested aliases cannot take the loader's
// time and memory. Without aliases a file has fewer nodes than bytes.
func nodeBudget(n int) int { return 16*n + 4096 }

// decoder reads one file's YAML nodes, keeping their lines for errors.
type decoder struct {
	file   string
	budget int // nodes left to visit
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// resolve follows aliases to the node they name and counts the visit.
func (d *decoder) resolve(n *yaml.Node) (*yaml.Node, error) {
	for hops := 0; n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops > 1000 {
			return nil, d.errorf(n, "alias *%s cannot be resolved", n.Value)
		}
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		return nil, d.errorf(n, "file too complex: its aliases expand to too many nodes")
	}
	return n, nil
}

// field is one key: value pair of a mapping.
type field struct {
	name  string
	key   *yaml.Node // for the line of errors about the field itself
	value *yaml.Node // resolved
}

// fields returns the pairs of a mapping in file order, with YAML merge keys
// ("<<: *defaults") expanded: explicit keys win over merged ones. A key given
// twice is an error, as it is for Envoy's YAML library.
func (d *decoder) fields(n *yaml.Node, what string) ([]field, error) {
	n, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errorf(n, "%s must be a mapping, not %s", what, kindName(n))
	}
	var out []field
	var merges []*yaml.Node
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := d.resolve(n.Content[i])
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, d.errorf(k, "%s: field names must be strings, not %s", what, kindName(k))
		}
		if k.Tag == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if seen[k.Value] {
			return nil, d.errorf(k, "%s: field %q is given twice", what, k.Value)
		}
		seen[k.Value] = true
		v, err := d.resolve(n.Content[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, field{name: k.Value, key: k, value: v})
	}
	for _, m := range merges {
		m, err := d.resolve(m)
		if err != nil {
			return nil, err
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			merged, err := d.fields(src, what+": merged value")
			if err != nil {
				return nil, err
			}
			for _, f := range merged {
				if !seen[f.name] {
					seen[f.name] = true
					out = append(out, f)
				}
			}
		}
	}
	return out, nil
}

// items returns the elements of a sequence, resolved. Null is empty.
func (d *decoder) items(n *yaml.Node, what string) ([]*yaml.Node, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errorf(n, "%s must be a list, not %s", what, kindName(n))
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		c, err := d.resolve(c)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// str reads a scalar as text, as Envoy's YAML library does for a string
// field: `value: 10` is "10", `value: true` is "true", null is "".
func (d *decoder) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", d.errorf(n, "%s must be a string, not %s", what, kindName(n))
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}

// boolean reads true/false, and YAML 1.1's yes/no/on/off as Envoy's YAML
// library does. Null is false.
func (d *decoder) boolean(n *yaml.Node, what string) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		if n.Tag == "!!null" {
			return false, nil
		}
		if n.Tag == "!!bool" || n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 {
			switch strings.ToLower(n.Value) {
			case "true", "yes", "y", "on":
				return true, nil
			case "false", "no", "n", "off":
				return false, nil
			}
		}
	}
	return false, d.errorf(n, "%s must be true or false, not %s", what, describe(n))
}

// integer reads a whole number (decimal, 0x hex, 0o or 0 octal, with _
// separators) of at least 0.
func (d *decoder) integer(n *yaml.Node, what string) (int64, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" && n.Tag != "!!null" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil && v >= 0 {
			return v, nil
		}
		if err == nil || strings.HasPrefix(n.Value, "-") {
			return 0, d.errorf(n, "%s must not be negative, got %s", what, n.Value)
		}
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, d.errorf(n, "%s %s is too large (at most %d)", what, n.Value, int64(math.MaxInt64))
		}
	}
	return 0, d.errorf(n, "%s must be a whole number, not %s", what, describe(n))
}

// anyValue converts YAML to plain Go values (string, bool, int64, float64,
// nil, []any, map[string]any), for metadata.
func (d *decoder) anyValue(n *yaml.Node, what string) (any, error) {
	n, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.MappingNode:
		fs, err := d.fields(n, what)
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, len(fs))
		for _, f := range fs {
			if m[f.name], err = d.anyValue(f.value, what+"."+f.name); err != nil {
				return nil, err
			}
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := d.anyValue(c, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			return d.boolean(n, what)
		case "!!int":
			if v, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				return v, nil
			}
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil {
				return f, nil
			}
		}
		return n.Value, nil
	}
	return nil, d.errorf(n, "%s: unexpected %s", what, kindName(n))
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.DocumentNode:
		return "a document"
	}
	return "an alias"
}

// describe quotes a scalar for an error, or names the kind of node.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}
