package headers_test

import (
	"errors"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/headers"
)

var clientNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

func TestParseRetryAfter(t *testing.T) {
	server := clientNow.Add(-time.Hour) // the server's clock is an hour behind
	for _, tc := range []struct {
		value, date string
		want        time.Duration
		bad         bool
	}{
		{"0", "", 0, false},
		{"17", "", 17 * time.Second, false},
		{" 5 ", "", 5 * time.Second, false},
		{"99999999999999999999999", "", math.MaxInt64, false},
		{httpDate(server.Add(7 * time.Second)), httpDate(server), 7 * time.Second, false},
		{httpDate(clientNow.Add(9 * time.Second)), "", 9 * time.Second, false},
		{httpDate(clientNow.Add(9 * time.Second)), "not a date", 9 * time.Second, false},
		{httpDate(server.Add(-time.Minute)), httpDate(server), 0, false},
		{"-1", "", 0, true},
		{"1.5", "", 0, true},
		{"soon", "", 0, true},
		{"", "", 0, true},
	} {
		got, err := headers.ParseRetryAfter(tc.value, tc.date, clientNow)
		if got != tc.want || (err != nil) != tc.bad || (err != nil && !errors.Is(err, headers.ErrMalformed)) {
			t.Errorf("ParseRetryAfter(%q, %q) = %v, %v; want %v, error %v", tc.value, tc.date, got, err, tc.want, tc.bad)
		}
	}
}

func TestParseLegacyReset(t *testing.T) {
	server := clientNow.Add(-time.Hour)
	for _, tc := range []struct {
		value, date string
		want        time.Duration
		bad         bool
	}{
		{"4", "", 4 * time.Second, false},
		{"1.5", "", 1500 * time.Millisecond, false},
		{strconv.FormatInt(server.Unix()+6, 10), httpDate(server), 6 * time.Second, false},
		{strconv.FormatInt(clientNow.Unix()+6, 10), "", 6 * time.Second, false},
		{strconv.FormatInt(server.Unix()-6, 10), httpDate(server), 0, false},
		{"-3", "", 0, true},
		{"NaN", "", 0, true},
		{"Inf", "", 0, true},
		{"0x10", "", 0, true},
		{"tomorrow", "", 0, true},
	} {
		got, err := headers.ParseLegacyReset(tc.value, tc.date, clientNow)
		if got != tc.want || (err != nil) != tc.bad || (err != nil && !errors.Is(err, headers.ErrMalformed)) {
			t.Errorf("ParseLegacyReset(%q, %q) = %v, %v; want %v, error %v", tc.value, tc.date, got, err, tc.want, tc.bad)
		}
	}
}

func TestParseQuotas(t *testing.T) {
	got, err := headers.ParseQuotas(`"burst";r=0;t=5, day;r=400;t=50000, "x";r=1`, `"burst";q=10;w=1, "day";q=1000;w=86400`)
	want := []headers.Quota{
		{Name: "burst", Quota: 10, Window: time.Second, Remaining: 0, Reset: 5 * time.Second},
		{Name: "day", Quota: 1000, Window: 24 * time.Hour, Remaining: 400, Reset: 50000 * time.Second},
		{Name: "x", Remaining: 1},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range [][2]string{
		{`"a";t=5`, ""},       // no r
		{`"a";r=-1;t=5`, ""},  // negative r
		{`"a";r=1;t=1.5`, ""}, // a decimal t
		{`"a";r=1;t=?1`, ""},  // a boolean t
		{`1;r=1`, ""},         // a name that is a number
		{`"a";r=`, ""},        // not a list
		{`"a";r=1`, `"a";q=`}, // a malformed policy
		{`(1 2);r=1`, ""},     // an inner list
	} {
		if _, err := headers.ParseQuotas(bad[0], bad[1]); !errors.Is(err, headers.ErrMalformed) {
			t.Errorf("ParseQuotas(%q, %q) = %v, want ErrMalformed", bad[0], bad[1], err)
		}
	}
	// A t beyond a time.Duration saturates rather than wrapping around.
	if got, err := headers.ParseQuotas(`"a";r=0;t=999999999999999`, ""); err != nil || got[0].Reset != math.MaxInt64 {
		t.Fatalf("huge t: %+v, %v; want the largest Duration", got, err)
	}
	// What the server writes reads back.
	qs := []headers.Quota{{Name: "api", Quota: 100, Window: time.Minute, Remaining: 0, Reset: 17 * time.Second}}
	if got, err := headers.ParseQuotas(headers.LimitValue(qs), headers.PolicyValue(qs)); err != nil || !reflect.DeepEqual(got, qs) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, qs)
	}
}

// The readers never panic and never answer a negative wait.
func FuzzReaders(f *testing.F) {
	f.Add("17", "", `"api";r=0;t=17`, `"api";q=100;w=60`)
	f.Add(httpDate(clientNow), httpDate(clientNow.Add(-time.Hour)), `a;r=1, b;r=0;t=99999999999999`, "")
	f.Add("1700000000.5", "Sun, 06 Nov 1994 08:49:37 GMT", `"x";r=0;t=0;pk=:aGk=:`, "bad")
	f.Fuzz(func(t *testing.T, value, date, limit, policy string) {
		if d, err := headers.ParseRetryAfter(value, date, clientNow); d < 0 || (err != nil && d != 0) {
			t.Fatalf("ParseRetryAfter(%q, %q) = %v, %v", value, date, d, err)
		}
		if d, err := headers.ParseLegacyReset(value, date, clientNow); d < 0 || (err != nil && d != 0) {
			t.Fatalf("ParseLegacyReset(%q, %q) = %v, %v", value, date, d, err)
		}
		qs, err := headers.ParseQuotas(limit, policy)
		for _, q := range qs {
			if q.Remaining < 0 || q.Reset < 0 {
				t.Fatalf("ParseQuotas(%q, %q) = %+v", limit, policy, q)
			}
		}
		if err != nil && qs != nil {
			t.Fatalf("ParseQuotas(%q, %q) = %+v with error %v", limit, policy, qs, err)
		}
	})
}
