package config

import (
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// strategyFields are the keys of a strategy given as a mapping.
var strategyFields = []string{"name", "interval", "one_in"}

// strategy reads `strategy: NAME` or `strategy: {name: NAME, interval: T,
// one_in: K}`; a parameter the named strategy does not take is an error,
// not silently ignored.
func (d *decoder) strategy(n *yaml.Node, ctx string) (policy.Strategy, policy.StrategyParams, error) {
	var params policy.StrategyParams
	if n.Kind == yaml.ScalarNode {
		name, err := d.strategyName(n, ctx)
		return name, params, err
	}
	if n.Kind != yaml.MappingNode {
		return "", params, d.errorf(n, "%s must be a name or a mapping {name: ..., interval: ..., one_in: ...}, not %s", ctx, kindName(n))
	}
	fs, err := d.fields(n, ctx)
	if err != nil {
		return "", params, err
	}
	var name policy.Strategy
	var nameNode *yaml.Node
	given := map[string]*yaml.Node{}
	for _, f := range fs {
		given[f.name] = f.value
		switch f.name {
		case "name":
			nameNode = f.value
			name, err = d.strategyName(f.value, ctx+": name")
		case "interval":
			params.Interval, err = d.positiveDuration(f.value, ctx+": interval")
		case "one_in":
			params.OneIn, err = d.integer(f.value, ctx+": one_in")
			if err == nil && params.OneIn < 1 {
				err = d.errorf(f.value, "%s: one_in must be at least 1, got %d", ctx, params.OneIn)
			}
		default:
			err = d.unknown(f, ctx, strategyFields)
		}
		if err != nil {
			return "", params, err
		}
	}
	if nameNode == nil {
		return "", params, d.errorf(n, "%s: name is missing (want one of %s)", ctx, joinNames(policy.Strategies()))
	}
	if v, ok := given["interval"]; ok && !slices.Contains([]policy.Strategy{policy.StrategyLeased, policy.StrategySynced, policy.StrategyGossip}, name) {
		return "", params, d.errorf(v, "%s: strategy %s has no interval (leased, synced and gossip have)", ctx, name)
	}
	if v, ok := given["one_in"]; ok && name != policy.StrategySampled {
		return "", params, d.errorf(v, "%s: strategy %s has no one_in (sampled has)", ctx, name)
	}
	return name, params, nil
}

func (d *decoder) strategyName(n *yaml.Node, ctx string) (policy.Strategy, error) {
	s, err := d.str(n, ctx)
	if err != nil {
		return "", err
	}
	name, err := policy.ParseStrategy(s)
	if err != nil {
		return "", d.errorf(n, "%s: %v", ctx, err)
	}
	return name, nil
}

// positiveDuration reads a Go duration such as 250ms, above 0.
func (d *decoder) positiveDuration(n *yaml.Node, what string) (time.Duration, error) {
	s, err := d.str(n, what)
	if err != nil {
		return 0, err
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, d.errorf(n, "%s must be a positive duration such as 1s, 5m or 1500ms, not %q", what, s)
	}
	return v, nil
}
