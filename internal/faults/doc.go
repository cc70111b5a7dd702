// Package faults injects the faults a client of Redis must survive, for
// the fault tests of the library and the service: a fault-injecting TCP
// proxy (toxiproxy, used as a library) in front of a redis-server that
// package testkit started, the list of faults, and a load that runs
// through one while it comes and goes.
//
// It is a module of its own, with those fault tests, so that toxiproxy
// and what it needs stay out of the library's module graph.
package faults
