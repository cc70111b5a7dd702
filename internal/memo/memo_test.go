package memo

import (
	"errors"
	"sync"
	"testing"
)

func TestBuildsOncePerKey(t *testing.T) {
	var c Cache[string, *int]
	builds := 0
	build := func(k string) (*int, error) { builds++; n := len(k); return &n, nil }
	a, _ := c.Get("abc", build)
	b, _ := c.Get("abc", build)
	if a != b || builds != 1 || *a != 3 {
		t.Fatalf("got %p %p after %d builds", a, b, builds)
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	var c Cache[int, int]
	fail := errors.New("bad")
	if _, err := c.Get(1, func(int) (int, error) { return 0, fail }); !errors.Is(err, fail) {
		t.Fatalf("error %v", err)
	}
	if v, err := c.Get(1, func(k int) (int, error) { return k + 1, nil }); err != nil || v != 2 {
		t.Fatalf("after an error: %d, %v", v, err)
	}
}

func TestStaysBounded(t *testing.T) {
	c := Cache[int, int]{Max: 10}
	for i := range 1000 {
		c.Get(i, func(k int) (int, error) { return k, nil })
	}
	n := 0
	c.items.Range(func(any, any) bool { n++; return true })
	if n > 10 {
		t.Fatalf("holding %d values, bound 10", n)
	}
}

func TestConcurrentGetsAgree(t *testing.T) {
	var c Cache[int, *int]
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for g := range got {
		wg.Go(func() {
			got[g], _ = c.Get(7, func(k int) (*int, error) { return &k, nil })
		})
	}
	wg.Wait()
	for _, p := range got[1:] {
		if p != got[0] {
			t.Fatal("concurrent first uses returned different values")
		}
	}
}
