package redisstore

import (
	"context"
	"math/bits"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

// The wide multiply-divide is where doubles would silently round: check the
// Lua helper against 128-bit integer arithmetic, products far above 2^53
// included.
func TestLuaMulDivIsExact(t *testing.T) {
	srv := testkit.StartServer(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	script := rueidis.NewLuaScript(luaSource("prelude") +
		"local q, r = mul_div(tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))\nreturn {q, r}")
	rapid.Check(t, func(t *rapid.T) {
		const max = 1<<50 - 1
		a := rapid.OneOf(rapid.Int64Range(0, max), rapid.Int64Range(1<<40, max)).Draw(t, "a")
		c := rapid.OneOf(rapid.Int64Range(1, max), rapid.Int64Range(1<<30, max)).Draw(t, "c")
		b := rapid.Int64Range(0, c).Draw(t, "b")
		hi, lo := bits.Mul64(uint64(a), uint64(b))
		q, r := bits.Div64(hi, lo, uint64(c))
		got, err := script.Exec(context.Background(), client, nil,
			[]string{itoa(a), itoa(b), itoa(c)}).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != int64(q) || got[1] != int64(r) {
			t.Fatalf("mul_div(%d, %d, %d) = %d rem %d, want %d rem %d", a, b, c, got[0], got[1], q, r)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
