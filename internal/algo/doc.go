// Package algo holds Floodgate's five rate-limit algorithms as pure
// functions over compact state:
//
//	(params, state, now, cost) -> (new state, result)
//
// Every quantity is an integer: time is microseconds since the Unix epoch and
// counts are whole units, so that the Redis scripts (Lua, whose numbers are
// IEEE doubles, exact up to 2^53) reproduce every decision bit for bit. The
// limits in [NewParams] keep every intermediate value of every algorithm
// below 2^53.
//
// The stores (the in-memory table, Redis) decide where a key's State lives;
// this package decides what happens to it.
package algo
