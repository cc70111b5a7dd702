package redisstore

import (
	"embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate/internal/algo"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts are put together from the files in lua/. The structured
// scripts (batch, peek, refund) take the prelude (the helpers), the three
// algorithm files, the shared decide/undo logic and a main part; the
// single-request script of each algorithm takes only what it runs (see
// singleParts).
func luaSource(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		files, ok := partFiles[p]
		if !ok {
			files = []string{p}
		}
		for _, f := range files {
			src, err := luaFiles.ReadFile("lua/" + f + ".lua")
			if err != nil {
				panic("redisstore: missing embedded script " + f) // a build defect, not an input
			}
			b.Write(src)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// partFiles lists the parts made of several files: the prelude starts with
// the exact multiply-divide, which the sliding window's single-request
// script takes alone.
var partFiles = map[string][]string{"prelude": {"mul_div", "prelude"}}

// singleParts is what the script deciding one request of an algorithm is
// made of: the request's arguments and time, the key's state (a string,
// except for the sliding log's hash), then the algorithm, written out flat.
func singleParts(k algo.Kind) []string {
	switch k {
	case algo.TokenBucket, algo.LeakyBucket:
		return []string{"allow_head", "allow_state", "allow_bucket"}
	case algo.FixedWindow:
		return []string{"allow_head", "allow_state", "allow_fixed_window"}
	case algo.SlidingWindow:
		return []string{"allow_head", "allow_state", "mul_div", "allow_sliding_window"}
	}
	return []string{"allow_head", "allow_sliding_log"}
}

// scripts holds one script per algorithm (the two buckets share theirs)
// plus the batch, peek and refund scripts. rueidis calls them with EVALSHA
// and answers NOSCRIPT (a node that restarted, a new cluster node) by
// sending the source once with EVAL.
type scripts struct {
	single [algo.SlidingWindow + 1]*rueidis.Lua
	many   [algo.SlidingWindow + 1]*rueidis.Lua
	batch  *rueidis.Lua
	peek   *rueidis.Lua
	refund *rueidis.Lua
}

func loadScripts() *scripts {
	s := &scripts{
		batch:  rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "decide", "batch")),
		peek:   rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "decide", "peek")),
		refund: rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "decide", "refund")),
	}
	for k := algo.TokenBucket; k <= algo.SlidingWindow; k++ {
		s.single[k] = rueidis.NewLuaScript(luaSource(singleParts(k)...))
		s.many[k] = rueidis.NewLuaScript(manySource(k))
	}
	return s
}

// manySource is the script deciding several independent requests of an
// algorithm in one call (many.lua): its single-request script made the
// function one_request, with the multiply-divide it may use defined once
// outside it, since a function defined inside is a new closure per request.
func manySource(k algo.Kind) string {
	var b strings.Builder
	parts := singleParts(k)
	if i := slices.Index(parts, "mul_div"); i >= 0 {
		b.WriteString(luaSource("mul_div"))
		parts = slices.Delete(slices.Clone(parts), i, i+1)
	}
	fmt.Fprintf(&b, "local WIDTH, REPLY = %d, %d\nlocal function one_request(KEYS, ARGV)\n", singleWidth(k), manyReplyWidth(k))
	// The script ends by returning its reply as a table; the function
	// returns the values themselves, which spares a table per request.
	body := luaSource(parts...)
	end := strings.LastIndex(body, "\nreturn {")
	close := strings.LastIndex(body, "}")
	b.WriteString(body[:end+1] + "return " + body[end+len("\nreturn {"):close] + body[close+1:])
	b.WriteString("end\n")
	b.WriteString(luaSource("many"))
	return b.String()
}

// singleWidth is how many values of a limit the single-request script of
// an algorithm reads: len(compiled.single).
func singleWidth(k algo.Kind) int {
	if k.IsBucket() {
		return 6
	}
	return 3
}

// compiled is a limit ready to send: its parameters as script arguments.
type compiled struct {
	params algo.Params
	args   [8]string // kind, rate, period, burst, scale, interval, tolerance, max_ahead
	single []string  // what the algorithm's single-request script reads of them
}

func compile(p algo.Params) *compiled {
	c := &compiled{params: p}
	for i, v := range []int64{int64(p.Kind), p.Rate, p.Period, p.Burst, p.Scale, p.Interval, p.Tolerance, p.MaxAhead} {
		c.args[i] = strconv.FormatInt(v, 10)
	}
	// Every ARGV element costs the script about 800 instructions to receive
	// (see allow_head.lua), so it gets only those it reads.
	if p.Kind.IsBucket() {
		c.single = []string{c.args[0], c.args[3], c.args[4], c.args[5], c.args[6], c.args[7]}
	} else {
		c.single = []string{c.args[0], c.args[1], c.args[2]}
	}
	return c
}

// singleArgs is the ARGV of the single-request scripts: now, cost, TTL
// slack, then the algorithm and its parameters (see allow_head.lua).
func singleArgs(now string, c *compiled, cost int64, slack string) []string {
	args := make([]string, 0, 3+len(c.single))
	args = append(args, now, strconv.FormatInt(cost, 10), slack)
	return append(args, c.single...)
}
