package redisstore

import (
	"embed"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate/internal/algo"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts are put together from the files in lua/: the helpers, the
// algorithm, the shared decide/undo logic and a main part.
func luaSource(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		src, err := luaFiles.ReadFile("lua/" + p + ".lua")
		if err != nil {
			panic("redisstore: missing embedded script " + p) // a build defect, not an input
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}

// scripts holds one script per algorithm plus the batch, peek and refund
// scripts. rueidis calls them with EVALSHA and answers NOSCRIPT (a node
// that restarted, a new cluster node) by sending the source once with EVAL.
type scripts struct {
	single [algo.SlidingWindow + 1]*rueidis.Lua
	batch  *rueidis.Lua
	peek   *rueidis.Lua
	refund *rueidis.Lua
}

func algorithmFile(k algo.Kind) string {
	switch k {
	case algo.TokenBucket, algo.LeakyBucket:
		return "bucket"
	case algo.SlidingLog:
		return "log"
	}
	return "window"
}

func loadScripts() *scripts {
	s := &scripts{
		batch:  rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "decide", "batch")),
		peek:   rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "decide", "peek")),
		refund: rueidis.NewLuaScript(luaSource("prelude", "bucket", "window", "log", "decide", "refund")),
	}
	for k := algo.TokenBucket; k <= algo.SlidingWindow; k++ {
		s.single[k] = rueidis.NewLuaScript(luaSource("prelude", algorithmFile(k), "decide", "single"))
	}
	return s
}

// compiled is a limit ready to send: its parameters as script arguments.
type compiled struct {
	params algo.Params
	args   [8]string // kind, rate, period, burst, scale, interval, tolerance, max_ahead
}

func compile(p algo.Params) *compiled {
	c := &compiled{params: p}
	for i, v := range []int64{int64(p.Kind), p.Rate, p.Period, p.Burst, p.Scale, p.Interval, p.Tolerance, p.MaxAhead} {
		c.args[i] = strconv.FormatInt(v, 10)
	}
	return c
}
