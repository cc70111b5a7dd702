// Package cluster shares one global limit among the nodes of a fleet. Each
// strategy is a floodgate.Limiter that wraps the in-memory store and/or a
// shared store, and picks another point between accuracy on one side and
// latency and availability on the other:
//
//	strategy  fast path                         shared traffic         overshoot                  undershoot
//	exact     a Redis script per decision       every decision         0                          0
//	local     memory, limit/N per node          none                   0                          large under skew
//	leased    memory, against a lease of quota  one call per key per T 0 (leases ≤ the budget)    unused leases
//	synced    memory + last global total        one call per key per T admissions on stale totals small
//	sampled   memory + a counter updated w.p. p p × decisions          variance ∝ 1/p             same
//	gossip    memory + a G-counter per window   deltas per T, no Redis admissions in gossip delay small
//
// exact is the redisstore package as it is. Every other strategy states
// its worst-case overshoot and undershoot, as formulas in N (nodes), T (the
// sync interval), R (the limit's rate), the arrival rate and the network
// delay, in the doc comment of its constructor, and its tests check the
// measured error against that bound.
//
// Every strategy reads time from a floodgate.Clock and reaches the other
// nodes and the shared store through interfaces (Members, and one per
// strategy for its shared state), so that a simulation can run the same code
// on a virtual clock and network. Windows are aligned to the shared store's
// clock or to logical epochs, never to each node's wall clock, so clock skew
// between nodes does not move them.
package cluster
