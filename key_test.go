package floodgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// The key-size policy as the memory store applies it: up to MaxKeyBytes a
// key is decided, past it refused with ErrKeyTooLong (and ErrInvalidKey), on
// every entry point, and the error quotes only the key's start.
func TestMemoryKeyPolicy(t *testing.T) {
	m := floodgate.NewMemory()
	ctx := context.Background()
	limit := floodgate.PerSecond(1)
	for _, tc := range []struct {
		name string
		size int
		want error
	}{
		{"2000 bytes", 2000, nil},
		{"the maximum", floodgate.MaxKeyBytes, nil},
		{"one byte over", floodgate.MaxKeyBytes + 1, floodgate.ErrKeyTooLong},
		{"one megabyte", 1 << 20, floodgate.ErrKeyTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.Repeat("k", tc.size)
			for _, e := range []struct {
				name string
				call func() error
			}{
				{"AllowN", func() error { _, err := m.AllowN(ctx, key, limit, 1); return err }},
				{"AllowAll", func() error {
					_, err := m.AllowAll(ctx, []floodgate.Request{{Key: key, Limit: limit, Cost: 1}})
					return err
				}},
				{"Adjust", func() error { return m.Adjust(ctx, key, limit, 1) }},
				{"Reset", func() error { return m.Reset(ctx, key) }},
			} {
				name, err := e.name, e.call()
				if !errors.Is(err, tc.want) || (tc.want != nil && !errors.Is(err, floodgate.ErrInvalidKey)) {
					t.Fatalf("%s: error %v, want %v", name, err, tc.want)
				}
				if err != nil && len(err.Error()) > 200 {
					t.Fatalf("%s: error of %d bytes echoes the key: %.300s", name, len(err.Error()), err)
				}
			}
		})
	}
	if n := m.Len(); n != 0 {
		t.Fatalf("the store holds %d keys, want none (the accepted ones were reset)", n)
	}
}

func TestCheckLength(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		max     int
		want    string // the error's text, "" for none
	}{
		{"within", "abc", 3, ""},
		{"over", "abcd", 3, `value "abcd" is longer than 3 bytes`},
		{"quotes only the start", strings.Repeat("v", 100), 10,
			`value "` + strings.Repeat("v", 32) + `…" (100 bytes) is longer than 10 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := floodgate.CheckLength("value", tc.s, tc.max)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("error %v, want %s", err, tc.want)
			case tc.want != "" && !errors.Is(err, floodgate.ErrKeyTooLong):
				t.Fatalf("error %v does not wrap ErrKeyTooLong", err)
			}
		})
	}
}
