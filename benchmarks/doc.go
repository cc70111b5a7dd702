// Package benchmarks holds the benchmarks that compare Floodgate with the
// libraries people use instead: the Memory store with
// golang.org/x/time/rate (this directory), the Redis store with
// go-redis/redis_rate (./redisstore). docs/benchmarks.md has the commands
// and the figures.
//
// It is a module of its own so that those peers stay out of the library's
// module graph: whoever imports github.com/floodgate-io/floodgate does not
// get them.
package benchmarks
