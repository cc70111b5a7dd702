package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

func newTestClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// want is the reply a single-request script must give for r, decided at now.
func want(r *algo.Result, now int64) []int64 {
	allowed := int64(0)
	if r.Allowed {
		allowed = 1
	}
	return []int64{allowed, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter, r.Delay, now}
}

// Each algorithm's single-request script against internal/algo itself, on
// random limits and sequences, with the time given explicitly: so that,
// unlike in the conformance suite, the clock may also go backwards.
func TestSingleScriptsMatchAlgo(t *testing.T) {
	srv := testkit.StartServer(t)
	client := newTestClient(t, srv.Addr())
	ctx := context.Background()
	for k := algo.TokenBucket; k <= algo.SlidingWindow; k++ {
		script := rueidis.NewLuaScript(luaSource(singleParts(k)...))
		t.Run(k.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				p, ok := genParams(rt, k)
				if !ok {
					return // a limit NewParams refuses never reaches a script
				}
				c := compile(p)
				key := fmt.Sprintf("allow:%d", rand.Uint64())
				var s algo.State
				var l algo.Log
				var r algo.Result
				now := int64(1_800_000_000_000_000) + rapid.Int64Range(0, p.Period).Draw(rt, "start")
				times := []int64{now}
				for i, n := 0, rapid.IntRange(1, 30).Draw(rt, "n"); i < n; i++ {
					switch rapid.IntRange(0, 11).Draw(rt, "move") {
					case 0: // the clock goes backwards
						now -= rapid.Int64Range(1, 2*p.Period).Draw(rt, "back")
					case 1, 2: // the same instant
					case 3: // a long idle
						now += rapid.Int64Range(2*p.Period, 100*p.Period).Draw(rt, "idle")
					case 4: // a period after an earlier step: its request is on the edge
						now = times[rapid.IntRange(0, len(times)-1).Draw(rt, "earlier")] + p.Period
					case 5: // the next microsecond
						now++
					default:
						now += rapid.Int64Range(0, 2*p.Period).Draw(rt, "wait")
					}
					times = append(times, now)
					if rapid.IntRange(0, 19).Draw(rt, "change") == 0 { // another limit on the same key
						if q, ok := genParams(rt, k); ok {
							p, c = q, compile(q)
						}
					}
					capacity := max(p.Burst, p.Rate)
					cost := rapid.OneOf(rapid.Just(int64(1)), rapid.Int64Range(0, capacity+1), rapid.Int64Range(0, capacity/3+1)).Draw(rt, "cost")
					if k == algo.SlidingLog {
						algo.DecideLog(&p, &l, now, cost, true, &r)
					} else {
						algo.Decide(&p, &s, now, cost, &r)
					}
					// A minute of TTL slack: the keys must outlive the test's
					// virtual time, as with Config.Clock.
					got, err := script.Exec(ctx, client, []string{key}, singleArgs(itoa(now), c, cost, "60000")).AsIntSlice()
					if err != nil {
						rt.Fatalf("step %d: %v", i, err)
					}
					if w := want(&r, now); !slices.Equal(got, w) {
						rt.Fatalf("step %d: %+v cost %d at %d:\n got  %v\n want %v", i, p, cost, now, got, w)
					}
				}
			})
		})
	}
}

func genParams(t *rapid.T, k algo.Kind) (algo.Params, bool) {
	var p algo.Params
	var err error
	if rapid.IntRange(0, 9).Draw(t, "huge") == 0 { // the exact wide arithmetic
		p, err = algo.NewParams(k, rapid.Int64Range(1<<30, 1<<44).Draw(t, "rate"), 86_400_000_000, 0)
	} else {
		periods := []int64{1, 7, 1000, 3000, 1_000_000, 60_000_000}
		p, err = algo.NewParams(k, rapid.Int64Range(1, 20).Draw(t, "rate"),
			rapid.SampledFrom(periods).Draw(t, "period"), rapid.Int64Range(0, 25).Draw(t, "burst"))
	}
	return p, err == nil
}

// A key that holds another type, or another algorithm's state, is decided
// as a new key and then holds this algorithm's state: the sliding log's hash
// and the other algorithms' strings may take each other's keys.
func TestSingleScriptsStartFreshOverOtherState(t *testing.T) {
	srv := testkit.StartServer(t)
	client := newTestClient(t, srv.Addr())
	ctx := context.Background()
	others := map[string][]string{
		"a sliding log":   {"HSET", "", "h", "0", "n", "1", "t", "3", "0", "1800000000000000:3"},
		"a fixed window":  {"SET", "", "3:1800000000000000:3:0"},
		"a token bucket":  {"SET", "", "1:1800000000000005:0:1"},
		"a list":          {"RPUSH", "", "x"},
		"a foreign value": {"SET", "", "not a state"},
	}
	const now = 1_800_000_000_000_000
	for k := algo.TokenBucket; k <= algo.SlidingWindow; k++ {
		script := rueidis.NewLuaScript(luaSource(singleParts(k)...))
		p, err := algo.NewParams(k, 5, 1_000_000, 0)
		if err != nil {
			t.Fatal(err)
		}
		var fresh algo.Result
		if k == algo.SlidingLog {
			algo.DecideLog(&p, new(algo.Log), now, 2, true, &fresh)
		} else {
			algo.Decide(&p, new(algo.State), now, 2, &fresh)
		}
		wantType := "string"
		if k == algo.SlidingLog {
			wantType = "hash"
		}
		for name, cmd := range others {
			if (k == algo.SlidingLog) == (cmd[0] == "HSET") || (k == algo.FixedWindow && name == "a fixed window") ||
				(k == algo.TokenBucket && name == "a token bucket") {
				continue // the algorithm's own state
			}
			key := fmt.Sprintf("fresh:%s:%s", k, name)
			cmd[1] = key
			srv.Do(t, cmd...)
			got, err := script.Exec(ctx, client, []string{key}, singleArgs(itoa(now), compile(p), 2, "0")).AsIntSlice()
			if err != nil {
				t.Fatalf("%s over %s: %v", k, name, err)
			}
			if w := want(&fresh, now); !slices.Equal(got, w) {
				t.Fatalf("%s over %s:\n got  %v\n want %v", k, name, got, w)
			}
			if typ := srv.Do(t, "TYPE", key); typ != wantType {
				t.Fatalf("%s over %s: the key is now a %s", k, name, typ)
			}
		}
	}
}
