package loadgen

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Limit
	}{
		{"token_bucket:1000/1s:burst=1000", Limit{"token_bucket", 1000, time.Second, 1000}},
		{"token_bucket:10/1s", Limit{"token_bucket", 10, time.Second, 0}},
		{"leaky_bucket:5/100ms:burst=2", Limit{"leaky_bucket", 5, 100 * time.Millisecond, 2}},
		{"fixed_window:5000/h", Limit{"fixed_window", 5000, time.Hour, 0}},
		{"sliding_window:100/1m", Limit{"sliding_window", 100, time.Minute, 0}},
		{"sliding_log:3/1m30s", Limit{"sliding_log", 3, 90 * time.Second, 0}},
		{" token_bucket:1/s ", Limit{"token_bucket", 1, time.Second, 0}},
	} {
		got, err := ParseLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		// String must give back something ParseLimit reads as the same limit.
		if again, err := ParseLimit(got.String()); err != nil || again != got {
			t.Errorf("ParseLimit(%q.String() = %q) = %+v, %v", tc.in, got.String(), again, err)
		}
	}
}

func TestParseLimitErrors(t *testing.T) {
	for in, fragment := range map[string]string{
		"":                                   "empty",
		"token_bucket":                       "missing rate/period",
		"tokenbucket:10/1s":                  `unknown algorithm "tokenbucket"; want one of token_bucket, leaky_bucket`,
		"token_bucket:10":                    `"10" is not rate/period`,
		"token_bucket:ten/1s":                `rate "ten"`,
		"token_bucket:0/1s":                  `rate "0"`,
		"token_bucket:-5/1s":                 `rate "-5"`,
		"token_bucket:10/":                   `period ""`,
		"token_bucket:10/0s":                 `period "0s"`,
		"token_bucket:10/-1s":                `period "-1s"`,
		"token_bucket:10/fortnight":          `period "fortnight"`,
		"token_bucket:10/1s:burst=0":         `burst "0"`,
		"token_bucket:10/1s:burst=x":         `burst "x"`,
		"token_bucket:10/1s:burst":           `burst ""`,
		"token_bucket:10/1s:burst=1:burst=2": "burst given twice",
		"token_bucket:10/1s:size=3":          `unknown option "size=3"`,
		"fixed_window:10/1s:burst=5":         "burst applies only to token_bucket and leaky_bucket, not fixed_window",
		"token_bucket:10/1ns":                "whole number of microseconds",
		"token_bucket:10/1500ns":             "whole number of microseconds",
	} {
		_, err := ParseLimit(in)
		if err == nil {
			t.Errorf("ParseLimit(%q) succeeded", in)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, fragment) || !strings.Contains(msg, "algorithm:rate/period") || strings.Contains(msg, "floodgate: invalid limit") {
			t.Errorf("ParseLimit(%q) error %q: want %q and the syntax, once", in, msg, fragment)
		}
	}
}

func TestLimitJSON(t *testing.T) {
	l := Limit{"token_bucket", 10, time.Second, 10}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"algorithm":"token_bucket","rate":10,"period":"1s","burst":10}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	var back Limit
	if err := json.Unmarshal(b, &back); err != nil || back != l {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	b, _ = json.Marshal(Limit{"fixed_window", 5, time.Minute, 0})
	if want := `{"algorithm":"fixed_window","rate":5,"period":"1m0s"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
