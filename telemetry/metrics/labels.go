package metrics

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Label values that stand for many.
const (
	// Other is the label of whatever is past a cardinality bound.
	Other = "_other"
	// None is the limit label of an event that names no limit.
	None = "_none"
	// Explicit is the policy label of requests that name no policy: they
	// carry their own limit (POST /v1/allow with a key, a Go caller's
	// explicit Limit).
	Explicit = "_explicit"
)

// MaxLabelBytes bounds a policy or limit label: a longer one keeps its
// first bytes and ends with "…" and a hash of the whole value (see
// Truncate), so that distinct long values stay distinct series. With the
// cardinality bounds it bounds what a scrape can grow to.
const MaxLabelBytes = 128

// hashHex is how many hex digits of a value's SHA-256 a truncated label
// keeps: 64 bits, so that among the bounded number of values a collision
// is vanishingly unlikely.
const hashHex = 16

// Truncate bounds a label value to MaxLabelBytes of valid UTF-8
// (Prometheus refuses any other). A value that fits and is valid is
// returned as is, without allocating; any other keeps its first bytes, cut
// on a character boundary with invalid bytes replaced, then "…" and 16 hex
// digits of the SHA-256 of the whole value: two different values give two
// different labels (but for a 64-bit hash collision), and one value always
// the same label, in every process.
func Truncate(v string) string {
	if len(v) <= MaxLabelBytes && utf8.ValidString(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	tail := "…" + hex.EncodeToString(sum[:hashHex/2])
	head := strings.ToValidUTF8(v[:min(len(v), MaxLabelBytes)], "\uFFFD")
	cut := MaxLabelBytes - len(tail)
	if len(head) > cut {
		head = head[:cut]
	}
	for len(head) > 0 && !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return head + tail
}

// labelSet maps up to a bound of label values to what was made for each.
// Reading a known value takes no lock and writes no shared memory: the
// map is replaced whole (copy on write) when a value is added, which
// happens once per value, and at most the bound's times. Its keys are
// typed, not boxed in an interface as a sync.Map's are, so that a lookup
// allocates nothing. Several sets may share one bound (count).
type labelSet[K comparable, V any] struct {
	m     atomic.Pointer[map[K]V]
	mu    sync.Mutex    // serializes additions
	count *atomic.Int64 // values held, by this set and those sharing its bound
	size  int64         // the bound
}

func newLabelSet[K comparable, V any](count *atomic.Int64, size int) *labelSet[K, V] {
	return &labelSet[K, V]{count: count, size: int64(size)}
}

// get returns the value made for key, making it with create when the
// bound leaves room; ok is false when it does not and key is not in the
// set. A full set refuses without taking its lock, so that a flood of new
// values (an attack) costs each caller one map lookup and no contention.
func (s *labelSet[K, V]) get(key K, create func() V) (v V, ok bool) {
	if v, ok := s.find(key); ok {
		return v, true
	}
	if s.count.Load() >= s.size {
		return v, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load()
	if old != nil {
		if v, ok := (*old)[key]; ok {
			return v, true
		}
	}
	if s.count.Add(1) > s.size {
		s.count.Add(-1)
		return v, false
	}
	v = create()
	s.m.Store(with(old, key, v))
	return v, true
}

// with is a copy of old (nil: empty) with key's value v.
func with[K comparable, V any](old *map[K]V, key K, v V) *map[K]V {
	m := map[K]V{}
	if old != nil {
		m = make(map[K]V, len(*old)+1)
		for k, w := range *old {
			m[k] = w
		}
	}
	m[key] = v
	return &m
}

// put replaces key's value with update(old value), old being the zero
// value when there is none, when the bound leaves room for one more
// value; a full set ignores it. Each put counts against the bound, so
// that values that grow with each put (a list) stay bounded too.
func (s *labelSet[K, V]) put(key K, update func(old V) V) {
	if s.count.Load() >= s.size {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count.Add(1) > s.size {
		s.count.Add(-1)
		return
	}
	old := s.m.Load()
	var v V
	if old != nil {
		v = (*old)[key]
	}
	s.m.Store(with(old, key, update(v)))
}

// find returns the value made for key, if any, with one atomic load and
// one map lookup.
func (s *labelSet[K, V]) find(key K) (v V, ok bool) {
	if m := s.m.Load(); m != nil {
		v, ok = (*m)[key]
	}
	return v, ok
}

// lazy is a value made on first use, then read with one atomic load: the
// series a label combination has not needed yet are not exported.
type lazy[T any] struct{ p atomic.Pointer[T] }

// get returns the value, making it with create the first time. Two
// callers racing may both call create; one value wins. Creating a series
// twice is harmless: a Vec hands out the same series for the same labels.
func (l *lazy[T]) get(create func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := create()
	if l.p.CompareAndSwap(nil, &v) {
		return v
	}
	return *l.p.Load()
}
