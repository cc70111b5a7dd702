package floodgate

import (
	"testing"
	"unsafe"
)

func TestHotStructsFitCacheLines(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size != 64 {
		t.Fatalf("shard is %d bytes, want 64", size)
	}
	if size := unsafe.Sizeof(slot{}); size != 64 {
		t.Fatalf("slot is %d bytes, want 64", size)
	}
	// See slot: a table starts on a line or, from 1 to 16 KiB, 8 bytes past
	// one.
	for size := minTableLen; size <= 1<<12; size *= 2 {
		off := uintptr(unsafe.Pointer(&newSlotArray(size).slots[0])) % 64
		if off != 0 && (off != 8 || size == minTableLen || size*64 >= 32<<10) {
			t.Fatalf("a table of %d slots starts %d bytes into a cache line", size, off)
		}
	}
}

// Keys whose hashes collide share a probe sequence; each must keep its own
// state.
func TestKeysWithTheSameHashStayApart(t *testing.T) {
	m := NewMemory()
	sh := &m.shards[0]
	limit, _ := m.limits.get(PerMinute(1))
	a, _ := sh.lookup(42, "a", limit, 0)
	sh.t.at(a).state.A = 1
	b, _ := sh.lookup(42, "b", limit, 0)
	sh.t.at(b).state.A = 2
	if a == b || sh.t.find(42, "a") != a || sh.t.find(42, "b") != b || sh.t.n != 2 {
		t.Fatal("colliding keys were merged")
	}
	sh.t.at(a).mu.Lock()
	sh.t.remove(a)
	if i := sh.t.find(42, "b"); sh.t.find(42, "a") >= 0 || i < 0 || sh.t.at(i).state.A != 2 || sh.t.n != 1 {
		t.Fatal("removing one colliding key disturbed the other")
	}
	b = sh.t.find(42, "b")
	sh.t.at(b).mu.Lock()
	sh.t.remove(b)
	for i := range sh.t.array().slots {
		if s := sh.t.at(i); s.ctl.Load() != 0 || s.entry != (entry{}) {
			t.Fatal("a removed key left its slot behind")
		}
	}
}
