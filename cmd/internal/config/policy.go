package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
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
	return d.addRoutes(f, policy.New(f.domain, d.file, f.domainLine, f.tree))
}

// addRoutes reads the routes of f, if it has any, against p.
func (d *decoder) addRoutes(f document, p *policy.Policy) (*policy.Policy, error) {
	switch {
	case f.routes != nil:
		return d.routes(f.routes, f.trusted, p)
	case f.trusted != nil:
		return nil, d.errorf(f.trusted, "trusted_proxies applies to routes, and this file has none")
	}
	return p, nil
}

// topFields are the fields of a file.
var topFields = []string{"domain", "descriptors", "routes", "trusted_proxies"}

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
