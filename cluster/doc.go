// Package cluster shares one global limit among the nodes of a fleet. Each
// strategy is a floodgate.Limiter that wraps the in-memory store and/or a
// shared store, and picks another point between accuracy on one side and
// latency and availability on the other (N nodes, R the limit per window,
// T the sync interval, D the network delay, for gossip the gossip delay of
// ⌈log₃(N−1)⌉ rounds of T plus the network's, λ a node's arrival rate):
//
//	strategy  fast path                      shared traffic              overshoot per window                undershoot
//	exact     a Redis script per decision    every decision              0                                   0
//	local     memory, R/N per node           none                        0 (while nodes agree on N)          Σ max(0, arrivals − share) ≤ R − ⌊R/N⌋
//	leased    memory, against a lease        one call per key per T      0 while Redis answers; ≤ N·S cut off unused leases
//	synced    memory + last global total     one batched call per T      ≤ Σ_{j≠i} min(λ_j(2T+D), R)          0 (unit costs)
//	sampled   memory + counter w.p. p by 1/p p per admitted request      z·√(R(1−p)/p) + staleness, w.p. ≥ 1−1/(1+z²) z·√(R(1−p)/p)
//	gossip    memory + G-counter per window  broadcasts + push/pull      ≤ (N−1)·min(λD, R)                  0
//
// exact is the redisstore package as it is. Every other strategy states
// its worst-case overshoot and undershoot, and what clock skew does to it,
// in the doc comment of its constructor (NewLocal, NewLeased, NewSynced,
// NewSampled, NewGossip), and its tests check the measured error against
// that bound over tables of N and T. leased, synced, sampled and gossip
// count windows (fixed_window; synced and sampled also sliding_window);
// local serves every algorithm.
//
// Every strategy reads time from a floodgate.Clock and reaches the other
// nodes and the shared store through interfaces (Members; Coordinator for
// leased, Counter for synced and sampled, GossipTransport for gossip), each
// with a Redis or memberlist implementation and an in-memory one, so that a
// simulation runs the same code on a virtual clock and network. The
// in-memory Counter and Coordinator are in package clustertest, for the
// tests of a service built on these strategies. Windows are
// aligned to the shared store's clock (leased, synced, sampled) or to
// epochs of the limit's period (gossip), never to each node's wall clock.
//
// Lifecycle, the same for every strategy and for the root package's and
// redisstore's stores:
//
//   - A constructor (NewLocal, NewLeased, ...) returns a value ready to
//     decide; it starts nothing.
//   - What has periodic work (Leased, Synced, Gossip) has a method that does
//     one round (Sync, Tick), which tests and simulations call on virtual
//     time, and Start(ctx), which runs it on a real ticker until Close or
//     until ctx ends; it fails with ErrStarted while running and ErrClosed
//     after Close. Local and Sampled have no periodic work and no Start.
//   - Close releases what the value holds and stops what Start started; it
//     may be called more than once and never fails, so it returns nothing.
//     Every strategy has it, also where it has nothing to release
//     (Sampled), so that a caller closes them all alike.
//   - Membership is the one exception: its Close leaves the cluster over the
//     network, which can fail, and returns that error (Shutdown leaves
//     without telling the others).
//
// Membership (hashicorp/memberlist) implements Members and carries the
// gossip strategy's state; StaticMembers is a fixed fleet.
package cluster
