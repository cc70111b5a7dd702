package floodgate

import (
	"testing"
	"unsafe"
)

func TestHotStructsFitCacheLines(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size != 64 {
		t.Fatalf("shard is %d bytes, want 64", size)
	}
	if size, hot := unsafe.Sizeof(entry{}), unsafe.Offsetof(entry{}.hash); size != 128 || hot != 64 {
		t.Fatalf("entry is %d bytes with %d hot, want 128 with 64", size, hot)
	}
}

// Keys whose hashes collide share a chain; each must keep its own state.
func TestKeysWithTheSameHashStayApart(t *testing.T) {
	m := NewMemory()
	sh := &m.shards[0]
	limit, _ := m.limits.get(PerMinute(1))
	a := sh.lookup(42, "a", limit, 0)
	b := sh.lookup(42, "b", limit, 0)
	if a == b || sh.find(42, "a") != a || sh.find(42, "b") != b || sh.n != 2 {
		t.Fatal("colliding keys were merged")
	}
	sh.remove(a)
	if sh.find(42, "a") != nil || sh.find(42, "b") != b || sh.n != 1 {
		t.Fatal("removing one colliding key disturbed the other")
	}
	sh.remove(b)
	if len(sh.keys) != 0 || sh.n != 0 {
		t.Fatal("the chain was not cleaned up")
	}
}
