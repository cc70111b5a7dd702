// Package sim is a deterministic discrete-event simulation of a fleet of
// nodes that share one global limit through the real strategies of package
// cluster (exact, local, leased, synced, sampled, gossip) on a virtual
// clock, with a simulated network between the nodes and to the shared
// store: delay, jitter and loss, but no sockets and no sleeps. A run is
// seeded; the same Config gives the same Result, byte for byte.
//
// # Time and events
//
// Virtual time is integer microseconds since the Unix epoch. Events sit in
// a queue ordered by (time, sequence number), and the engine runs them one
// after the other. Each node reads its own floodgate.Clock: virtual time
// plus the node's clock offset (Config.Skew spreads the offsets evenly over
// [−Skew, +Skew]). The shared store (counter, coordinator, the exact
// strategy's Memory) and the oracle read true virtual time.
//
// # Network calls as cooperative processes
//
// The strategies call their shared state synchronously (Counter.Add,
// Coordinator.Renew, the exact strategy's AllowN). To give those calls a
// delay without threads racing, a decision or a round that may reach the
// store runs as a process: a goroutine that runs only while the engine has
// handed it control. When it calls the store, the delayed wrapper hands
// control back to the engine with the call; the engine schedules the call's
// arrival at the store (after a one-way delay of Delay/2 plus a uniform
// jitter in [0, Jitter]), runs the real in-memory store there, schedules
// the reply (another one-way delay) and resumes the process then. A call
// whose request or reply is lost (probability Loss each way), or whose
// round trip exceeds the Timeout, returns an error wrapping
// floodgate.ErrStoreUnavailable at the Timeout, as a real client would; a
// lost reply still leaves the call applied at the store. A leased
// renewal waits up to the node's OutageAfter instead (cluster.
// DefaultOutageAfter), since a leased node takes only that much silence
// for an outage; the request that triggered it waits with it, where a real
// node would be denied at the Timeout and apply the answer later. Exactly one
// goroutine runs at a time and every random choice comes from seeded PCG
// generators (arrivals, network, each sampled node's draws kept apart), so
// the run does not depend on Go's scheduler. Each node holds one key, so a
// process has at most one call in flight (the leased strategy's Sync runs
// one worker per key).
//
// Gossip goes through a small transport of this package (a
// cluster.GossipTransport) that behaves as memberlist does under floodgate
// serve. A broadcast is queued (a newer one of the same name replaces it)
// and goes out every T (serve's gossip interval) to 3 random live peers,
// for 4·⌈log₁₀(N+1)⌉ rounds; every T each node also exchanges full state with one random live
// peer (push/pull, more often than memberlist's 30 s); every message has
// its own one-way delay and loss draw.
//
// # What is measured
//
// An oracle counts, per window of the limit's Period aligned to true time,
// the requests offered and admitted. A request is admitted at the moment
// its decision is made: at the node when AllowN returns, for the exact
// strategy at the store, where the decision is taken, and for sampled at
// the arrival (it decides, then holds the request for its push). From those counts a
// Result gives the overshoot (admitted − Rate, when positive: max, p99,
// share of windows over), the undershoot (denials while the oracle's count
// of the window still had room), utilisation, shared calls per decision and
// per second, and Jain's fairness index of admitted/offered across nodes
// and across clients.
package sim
