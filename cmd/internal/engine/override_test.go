package engine_test

import (
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
)

// overridePolicy has a limit counted by the request's values, one whose
// wildcard shares one count (share_threshold), and one that replaces the
// first by name.
const overridePolicy = `
domain: rl
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5, name: per-user}
  - key: path
    value: "a*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plan
    rate_limit: {unit: minute, requests_per_unit: 100, replaces: [{name: per-user}]}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
`

// read is a descriptor of hits_addend 0.
func read(kv ...string) engine.Descriptor {
	d := desc(kv...)
	d.HitsSet = true
	return d
}

// overridden is a descriptor with a limit override of rate per period.
func overridden(rate int64, period time.Duration, kv ...string) engine.Descriptor {
	d := desc(kv...)
	d.Override = &floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period}
	return d
}

// An override counts where Envoy's service counts it: under the entries'
// values and the window, so with the configured limit of the same window
// on the same entries and with the overrides of that window, apart from
// limits of other windows and from a shared wildcard's count. Its
// descriptor's configured limit does not apply, so it replaces nothing;
// and an override of 0 denies. A limit of 0 counts what it denies in its
// window, and answers a read by that count.
func TestOverridesCountAsEnvoysService(t *testing.T) {
	e, _ := newEngine(t, overridePolicy)
	for i, step := range []struct {
		name  string
		descs []engine.Descriptor
		want  []int64 // each descriptor's remaining; -1: no limit applies
		code  engine.Code
	}{
		{"the configured limit", []engine.Descriptor{desc("user", "ann")}, []int64{4}, engine.OK},
		{"an override of the same window shares its count", []engine.Descriptor{overridden(10, time.Minute, "user", "ann")}, []int64{8}, engine.OK},
		{"an override of another window counts apart", []engine.Descriptor{overridden(10, time.Hour, "user", "ann")}, []int64{9}, engine.OK},
		{"another rate, the same window: the same count", []engine.Descriptor{overridden(7, time.Minute, "user", "ann")}, []int64{4}, engine.OK},
		{"the configured limit sees the overrides' hits", []engine.Descriptor{desc("user", "ann")}, []int64{1}, engine.OK},
		{"an override on entries no limit matches", []engine.Descriptor{overridden(3, time.Minute, "nothing", "x")}, []int64{2}, engine.OK},
		{"and again, the same window", []engine.Descriptor{overridden(4, time.Minute, "nothing", "x")}, []int64{2}, engine.OK},
		{"a shared wildcard's count", []engine.Descriptor{desc("path", "abc")}, []int64{4}, engine.OK},
		{"is not an override's, which counts the values", []engine.Descriptor{overridden(5, time.Minute, "path", "abc")}, []int64{4}, engine.OK},
		{"a configured limit replaces by name", []engine.Descriptor{desc("plan", "pro"), desc("user", "bob")}, []int64{99, -1}, engine.OK},
		{"not when its descriptor has an override (which shares plan=pro's count)", []engine.Descriptor{overridden(3, time.Minute, "plan", "pro"), desc("user", "bob")}, []int64{1, 4}, engine.OK},
		{"an override of 0 denies", []engine.Descriptor{overridden(0, time.Minute, "user", "cid")}, []int64{0}, engine.OverLimit},
		{"a read of a zero limit with nothing counted", []engine.Descriptor{read("blocked", "x")}, []int64{0}, engine.OK},
		{"a zero limit denies, and counts the hit", []engine.Descriptor{desc("blocked", "x")}, []int64{0}, engine.OverLimit},
		{"then a read of it is over", []engine.Descriptor{read("blocked", "x")}, []int64{0}, engine.OverLimit},
		{"an override of its window sees its hit", []engine.Descriptor{overridden(5, time.Minute, "blocked", "x")}, []int64{3}, engine.OK},
		{"the zero limit sees the override's, in descriptor order", []engine.Descriptor{overridden(5, time.Minute, "blocked", "x"), desc("blocked", "x"), overridden(5, time.Minute, "blocked", "x")}, []int64{2, 0, 0}, engine.OverLimit},
	} {
		// CountDenied: denied hits count, as in Envoy's service by default.
		r := decide(t, e, engine.Request{Domain: "rl", Descriptors: step.descs, CountDenied: true})
		if r.Code != step.code {
			t.Errorf("step %d, %s: code %v, want %v", i, step.name, codes(r), step.code)
		}
		for j, want := range step.want {
			ls := r.Descriptors[j].Limits
			switch {
			case want < 0 && len(ls) != 0:
				t.Errorf("step %d, %s: descriptor %d has limits %+v, want none", i, step.name, j, ls)
			case want >= 0 && len(ls) != 1:
				t.Errorf("step %d, %s: descriptor %d has %d limits, want 1", i, step.name, j, len(ls))
			case want >= 0 && ls[0].Decision.Remaining != want:
				t.Errorf("step %d, %s: descriptor %d has %d left, want %d", i, step.name, j, ls[0].Decision.Remaining, want)
			}
		}
	}
}
