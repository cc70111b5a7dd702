package config

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// concurrencySpec is a route's `concurrency:` block as written.
type concurrencySpec struct {
	c       policy.Concurrency
	limit   *yaml.Node
	maxWait *yaml.Node
}

var concurrencyFields = []fieldOf[concurrencySpec]{
	{"limit", nodeInto(func(s *concurrencySpec) **yaml.Node { return &s.limit })},
	{"algorithm", strInto(func(s *concurrencySpec) *string { return &s.c.Algorithm })},
	{"queue", func(d *decoder, f field, ctx string, s *concurrencySpec) error {
		n, err := d.integer(f.value, f.what(ctx))
		if err == nil && n > policy.MaxConcurrency {
			err = d.errorf(f.value, "%s: queue %d is too large (at most %d)", ctx, n, policy.MaxConcurrency)
		}
		s.c.Queue = int(n)
		return err
	}},
	{"max_wait", nodeInto(func(s *concurrencySpec) **yaml.Node { return &s.maxWait })},
}

// concurrency reads a route's bulkhead:
//
//	concurrency: {limit: adaptive, algorithm: vegas, queue: 10, max_wait: 50ms}
//
// limit is required: adaptive, a whole number, or off (exempt from
// --concurrency). A queue without max_wait waits policy.DefaultMaxWait.
func (d *decoder) concurrency(n *yaml.Node, ctx string) (*policy.Concurrency, error) {
	fs, err := d.fields(n, ctx)
	if err != nil {
		return nil, err
	}
	var s concurrencySpec
	given, err := decodeFields(d, fs, ctx, concurrencyFields, &s)
	if err != nil {
		return nil, err
	}
	if s.limit == nil {
		return nil, d.errorf(n, "%s: limit is required: adaptive, off or a whole number of at least 1", ctx)
	}
	text, err := d.str(s.limit, ctx+": limit")
	if err != nil {
		return nil, err
	}
	if s.c.Limit, s.c.Off, err = policy.ParseConcurrencyLimit(text); err != nil {
		return nil, d.errorf(s.limit, "%s: limit %v", ctx, err)
	}
	if s.maxWait != nil {
		if s.c.MaxWait, err = d.positiveDuration(s.maxWait, ctx+": max_wait"); err != nil {
			return nil, err
		}
	} else if s.c.Queue > 0 {
		s.c.MaxWait = policy.DefaultMaxWait
	}
	if err := s.c.Check(); err != nil {
		at := n // the line of the setting the message starts with
		if field, _, _ := strings.Cut(err.Error(), " "); given[field] != nil {
			at = given[field]
		}
		return nil, d.errorf(at, "%s: %v", ctx, err)
	}
	return &s.c, nil
}
