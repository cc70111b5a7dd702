package headers_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/headers"
)

func TestItems(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{headers.Policy("api", 100, time.Minute), `"api";q=100;w=60`},
		{headers.Policy("api", 100, 1500*time.Millisecond), `"api";q=100;w=2`},
		{headers.Policy("api", 100, time.Millisecond), `"api";q=100;w=1`},
		{headers.Policy("api", 100, 0), `"api";q=100;w=1`},
		{headers.Policy("api", -5, time.Second), `"api";q=0;w=1`},
		{headers.Policy("api", 1<<62, time.Second), `"api";q=999999999999999;w=1`},
		{headers.Limit("api", 0, 17*time.Second), `"api";r=0;t=17`},
		{headers.Limit("api", 3, 16*time.Second+time.Microsecond), `"api";r=3;t=17`},
		{headers.Limit("api", 3, 0), `"api";r=3;t=0`},
		{headers.Limit("api", -1, -time.Second), `"api";r=0;t=0`},
		{headers.Limit(`a"b\c`, 1, time.Second), `"a\"b\\c";r=1;t=1`},
		{headers.Limit("é\n", 1, time.Second), `"%C3%A9%0A";r=1;t=1`},
		{headers.RetryAfter(0), "0"},
		{headers.RetryAfter(-time.Second), "0"},
		{headers.RetryAfter(time.Nanosecond), "1"},
		{headers.RetryAfter(time.Second), "1"},
		{headers.RetryAfter(time.Second + time.Microsecond), "2"},
		{headers.RetryAfter(17 * time.Second), "17"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestFieldsParseBack(t *testing.T) {
	qs := []headers.Quota{
		{Name: "burst", Quota: 20, Window: 4 * time.Second, Remaining: 7, Reset: 2500 * time.Millisecond},
		{Name: `api.user "x"`, Quota: 1000, Window: time.Hour, Remaining: 0, Reset: 59 * time.Minute},
	}
	h := http.Header{}
	headers.Set(h, qs)
	policy, err := headers.ParseList(h.Get("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("%q: %v", h.Get("RateLimit-Policy"), err)
	}
	limit, err := headers.ParseList(h.Get("RateLimit"))
	if err != nil {
		t.Fatalf("%q: %v", h.Get("RateLimit"), err)
	}
	if len(policy) != 2 || len(limit) != 2 {
		t.Fatalf("policy %v, limit %v", policy, limit)
	}
	want := []struct {
		name       string
		q, w, r, t int64
	}{{"burst", 20, 4, 7, 3}, {`api.user "x"`, 1000, 3600, 0, 3540}}
	for i, w := range want {
		p, l := policy[i], limit[i]
		if p.Value != w.name || l.Value != w.name {
			t.Errorf("item %d: names %v %v", i, p.Value, l.Value)
		}
		for _, c := range []struct {
			it   headers.Item
			key  string
			want int64
		}{{p, "q", w.q}, {p, "w", w.w}, {l, "r", w.r}, {l, "t", w.t}} {
			if v, ok := c.it.Param(c.key); !ok || v != c.want {
				t.Errorf("item %d: %s=%v, want %d", i, c.key, v, c.want)
			}
		}
	}
	h = http.Header{}
	headers.Set(h, nil)
	if len(h) != 0 {
		t.Fatalf("no quotas set %v", h)
	}
}

func TestParseList(t *testing.T) {
	items, err := headers.ParseList(`"a";q=1;w=2, tok;x, ?1, 1.5;p=:aGk=:, (1 "b");z=-3`)
	if err != nil {
		t.Fatal(err)
	}
	want := []headers.Item{
		{Value: "a", Params: []headers.Param{{Key: "q", Value: int64(1)}, {Key: "w", Value: int64(2)}}},
		{Value: headers.Token("tok"), Params: []headers.Param{{Key: "x", Value: true}}},
		{Value: true},
		{Value: 1.5, Params: []headers.Param{{Key: "p", Value: []byte("hi")}}},
		{Inner: []headers.Item{{Value: int64(1)}, {Value: "b"}}, Params: []headers.Param{{Key: "z", Value: int64(-3)}}},
	}
	if !reflect.DeepEqual(items, want) {
		t.Fatalf("got %#v", items)
	}
	for _, bad := range []string{
		`"a`, `"a";`, `"a",`, `"a" "b"`, `"a";Q=1`, `1234567890123456`, `1.2345`, `"\x"`, `"é"`, `:!!:`, `?2`, `(1`, `"a";q=`, `,`,
	} {
		if _, err := headers.ParseList(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if items, err := headers.ParseList(""); err != nil || len(items) != 0 {
		t.Fatalf("empty: %v %v", items, err)
	}
}

func FuzzParseList(f *testing.F) {
	f.Add(`"a";q=1;w=2, "b";r=0;t=17`)
	f.Add(`(1 2);a, ?0, :aGk=:`)
	f.Fuzz(func(t *testing.T, s string) {
		headers.ParseList(s) // must not panic
	})
}

// Any name, however odd, gives a field that parses back to one item.
func FuzzNames(f *testing.F) {
	f.Add("api", int64(1), int64(2))
	f.Add("\"\\\x00é", int64(-1), int64(1<<62))
	f.Fuzz(func(t *testing.T, name string, n, d int64) {
		for _, field := range []string{headers.Policy(name, n, time.Duration(d)), headers.Limit(name, n, time.Duration(d))} {
			items, err := headers.ParseList(field)
			if err != nil || len(items) != 1 {
				t.Fatalf("%q: %v %v", field, items, err)
			}
			if s, ok := items[0].Value.(string); !ok || (!strings.ContainsAny(name, "%") && isPrintable(name) && s != name) {
				t.Fatalf("%q: name %v", field, items[0].Value)
			}
		}
	})
}

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
