package insight

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// keyIndex finds every key put and not removed, and no other, whatever
// the order of puts and removals: checked against a Go map, with hashes
// drawn from a few values so that keys collide, probe past each other and
// wrap around the table's end, which is what removal's shifting must get
// right.
func TestKeyIndexMatchesAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 8).Draw(t, "k")
		x := newKeyIndex(k)
		var nodes []counter // as a summary's: node i holds key nodes[i].key
		want := map[string]int32{}
		hashes := rapid.SliceOfN(rapid.Uint32Range(0, uint32(2*len(x.slots))), 1, 4).Draw(t, "hashes")
		hashOf := func(key string) uint32 {
			var n int
			fmt.Sscan(key, &n)
			return hashes[n%len(hashes)]
		}
		for range rapid.IntRange(0, 200).Draw(t, "ops") {
			key := fmt.Sprint(rapid.IntRange(0, 3*k).Draw(t, "key"))
			h := hashOf(key)
			at, found := x.find(h, key, nodes)
			node, ok := want[key]
			if found != ok || found && x.node(at) != node {
				t.Fatalf("find %q: found %v at node %d, want %v at %d", key, found, x.node(at), ok, node)
			}
			switch {
			case found:
				x.remove(h, node)
				nodes[node].key = ""
				delete(want, key)
			case len(want) < k:
				node := int32(len(nodes))
				nodes = append(nodes, counter{key: key})
				x.put(at, h, node)
				want[key] = node
			}
		}
		for key, node := range want {
			if at, found := x.find(hashOf(key), key, nodes); !found || x.node(at) != node {
				t.Fatalf("%q is at node %d, but find says %v, %d", key, node, found, x.node(at))
			}
		}
	})
}
