package config_test

import (
	"fmt"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

func Example() {
	p, err := config.Parse("api.yaml", []byte(`
domain: api
descriptors:
  - key: tenant
    value: free
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: api_key
    rate_limits:
      - {name: burst, algorithm: token_bucket, period: 1s, requests_per_unit: 5, burst: 20}
      - {name: daily, unit: day, requests_per_unit: 10000, failure_mode: fail_open}
`))
	if err != nil {
		fmt.Println(err) // api.yaml:12: descriptor "api_key": ...
		return
	}
	set, err := policy.NewSet(p)
	if err != nil {
		fmt.Println(err)
		return
	}

	request := policy.Descriptor{Entries: []policy.Entry{{Key: "tenant", Value: "free"}, {Key: "user", Value: "42"}}}
	rules, ok := set.Match("api", request)
	fmt.Println(ok, rules[0].Limit, rules[0].StateKey(request))

	request = policy.Descriptor{Entries: []policy.Entry{{Key: "api_key", Value: "k-7"}}}
	rules, _ = set.Match("api", request)
	for _, r := range rules {
		fmt.Printf("%s: %v, failure mode %q, key %s\n", r.Name, r.Limit, r.FailureMode, r.StateKey(request))
	}

	_, ok = set.Match("api", policy.Descriptor{Entries: []policy.Entry{{Key: "tenant", Value: "free"}}})
	fmt.Println(ok)
	// Output:
	// true fixed_window 60/1m0s api/tenant=free/user=42
	// burst: token_bucket 5/1s burst 20, failure mode "", key api/api_key=k-7#0
	// daily: fixed_window 10000/24h0m0s, failure mode "fail_open", key api/api_key=k-7#1
	// false
}

func ExampleParse_error() {
	_, err := config.Parse("config/api.yaml", []byte(`
domain: api
descriptors:
  - key: user_id
    rate_limit:
      unit: second
      requests_per_second: 10
`))
	fmt.Println(err)
	// Output:
	// config/api.yaml:7: descriptor "user_id": rate_limit: unknown field "requests_per_second"
}
