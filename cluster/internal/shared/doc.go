// Package shared holds the rules of the state a fleet shares: the window
// counts of the synced and sampled strategies and the lease books of the
// leased one. The Redis stores of package cluster run them as Lua scripts
// (lua/counter_add.lua, lua/lease_renew.lua); the in-memory stores here run
// them in Go, for package clustertest and cluster's own tests. Validation
// and window numbering are the same code for both.
//
// Its CounterAdd, CounterRead, LeaseRequest and LeaseGrant have the very
// fields of cluster's types of those names, so that each converts to the
// other (cluster.LeaseGrant(g)) at no cost, and a field added to one and
// not the other fails to compile. They are declared here, not there,
// because cluster imports this package; cluster's types carry the docs.
package shared
