package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// The Zipf traffic of the "run as a new user would" tests: many keys, a
// few of them heavy, as real clients are.
const (
	zipfSkew    = 1.1   // s of math/rand/v2's Zipf: P(rank k) ∝ k^−1.1
	zipfKeys    = 20000 // the key space a run draws from
	zipfWorkers = 8     // the load generator's connections
	// zipfMaxSeries bounds the floodgate_* series of /metrics: a few
	// hundred whatever the number of keys, since no key is a label.
	zipfMaxSeries = 300
	// zipfMillionEnv opts in to a million distinct keys before the series
	// count (a few minutes: 3 for each surface on a busy 2-core machine).
	zipfMillionEnv = "FLOODGATE_ZIPF_MILLION"
)

// zipfRequests is the requests of a default run; fewer under the race
// detector, which slows every request several times over.
func zipfRequests() int {
	if testkit.RaceEnabled {
		return 10000
	}
	return 50000
}

// zipfSurface is one surface as the load generator sees it: how it sends
// a key's request, and how the surface names that key and its policy and
// limit on the admin routes.
type zipfSurface struct {
	name          string
	admin, token  string // the admin listener's URL and its token
	policy, limit string // as /admin and /metrics name them
	keyName       func(key string) string
	send          func(c *http.Client, key string) (zipfDecision, error)
}

// zipfDecision is what a request's answer told the generator.
type zipfDecision struct {
	allowed bool
	used    float64 // the share of the limit used after it, as observe.Event.Used
}

// keyTally is the generator's exact account of one key.
type keyTally struct {
	admitted, denied int64
	lastUsed         float64 // after the key's last request
}

// floodgate serve and floodgate proxy under Zipf traffic, as a new user
// would run them: /admin/top lists the true top 10 keys by admitted and by
// denied requests (recall ≥ 0.9 against the generator's exact counts,
// every count within its stated error), /admin/near-limit exactly the keys
// the generator left at 80% of their limit or more, and /metrics has the
// same decision metrics on both and a few hundred floodgate_* series
// however many keys were seen (a million with FLOODGATE_ZIPF_MILLION=1).
//
// The limit is a fixed window of an hour, so that a run stays in one
// window and each key's last decision is its most used; each key is sent
// by one worker only, in order, so that its last decision is the one the
// generator saw last.
func TestZipfTrafficShowsTheTopAndNearLimitKeys(t *testing.T) {
	requests := zipfRequests()
	// A per-key limit of 1/150 of the requests (333 of 50,000): the ten
	// heaviest keys are denied, a few more come near it, and the
	// admitted units the limit leaves the heaviest keys stay above the
	// error bound of the top lists (their units over 128 counters, about
	// 260), which a lower limit would not.
	limit := int64(requests / 150)
	policy := writePolicy(t, fmt.Sprintf(`domain: zipf
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: %d}
`, limit))
	httpAddr, _, _ := startServe(t, "--config", policy, "--admin-token", "T")
	proxyAddr, proxyAdmin := startProxyAdmin(t, "--limit", fmt.Sprintf("%d/h", limit), "--algorithm", "fixed_window",
		"--by", "header:X-Key", "--admin", "127.0.0.1:0", "--admin-token", "T")
	surfaces := []zipfSurface{
		{
			name: "serve", admin: "http://" + httpAddr, token: "T", policy: "zipf", limit: "per-user",
			keyName: func(k string) string { return "zipf/user=" + k },
			send:    func(c *http.Client, k string) (zipfDecision, error) { return serveAllow(c, httpAddr, k) },
		},
		{
			name: "proxy", admin: "http://" + proxyAdmin, token: "T", policy: "proxy", limit: "proxy",
			keyName: func(k string) string { return "proxy:" + k },
			send:    func(c *http.Client, k string) (zipfDecision, error) { return proxyGet(c, proxyAddr, k) },
		},
	}
	keys := zipfSequence(requests)
	clearOfWindowEdge(t, time.Hour)
	decisionNames := map[string][]string{}
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			start := time.Now()
			tally := generate(t, s, keys)
			t.Logf("%d requests over %d distinct keys in %v", len(keys), len(tally), time.Since(start).Round(time.Millisecond))
			for _, by := range []string{"admitted", "denied"} {
				checkTop(t, s, by, tally)
			}
			checkNearLimit(t, s, tally)
			decisionNames[s.name] = checkSeries(t, s, len(tally))
			if os.Getenv(zipfMillionEnv) == "1" {
				start := time.Now()
				generate(t, s, distinctKeys(1_000_000))
				t.Logf("a million distinct keys more in %v", time.Since(start).Round(time.Millisecond))
				checkSeries(t, s, 1_000_000+len(tally))
			}
		})
	}
	if a, b := decisionNames["serve"], decisionNames["proxy"]; !slices.Equal(a, b) {
		t.Errorf("decision metrics differ: serve has %q, proxy %q", a, b)
	}
}

// zipfSequence is n keys drawn from the Zipf distribution over zipfKeys
// keys, the same every run: "u0" is the heaviest.
func zipfSequence(n int) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(16, 1)), zipfSkew, 1, zipfKeys-1)
	out := make([]string, n)
	for i := range out {
		out[i] = "u" + strconv.FormatUint(z.Uint64(), 10)
	}
	return out
}

// distinctKeys is n keys never drawn by zipfSequence.
func distinctKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "m" + strconv.Itoa(i)
	}
	return out
}

// generate sends keys to s from zipfWorkers workers, each key always from
// the same worker in the order of keys, and returns the exact tally of
// each key's answers. It stops a worker at its first failure.
func generate(t *testing.T, s zipfSurface, keys []string) map[string]*keyTally {
	t.Helper()
	client := &http.Client{
		Timeout:   timing.Patience,
		Transport: &http.Transport{MaxIdleConnsPerHost: zipfWorkers},
	}
	defer client.CloseIdleConnections()
	shards := make([][]string, zipfWorkers)
	for _, k := range keys {
		i := fnv32(k) % zipfWorkers
		shards[i] = append(shards[i], k)
	}
	tallies := make([]map[string]*keyTally, zipfWorkers)
	errs := make([]error, zipfWorkers)
	var wg sync.WaitGroup
	for w := range zipfWorkers {
		wg.Go(func() {
			tallies[w] = map[string]*keyTally{}
			for _, k := range shards[w] {
				d, err := s.send(client, k)
				if err != nil {
					errs[w] = fmt.Errorf("key %s: %w", k, err)
					return
				}
				kt := tallies[w][k]
				if kt == nil {
					kt = &keyTally{}
					tallies[w][k] = kt
				}
				if d.allowed {
					kt.admitted++
				} else {
					kt.denied++
				}
				kt.lastUsed = d.used
			}
		})
	}
	wg.Wait()
	all := map[string]*keyTally{}
	for w := range zipfWorkers {
		if errs[w] != nil {
			t.Fatalf("%s: %v", s.name, errs[w])
		}
		for k, kt := range tallies[w] {
			all[k] = kt
		}
	}
	return all
}

// fnv32 is FNV-1a, to spread keys over the workers.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := range len(s) {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// serveAllow asks serve's POST /v1/allow for key's request.
func serveAllow(c *http.Client, addr, key string) (zipfDecision, error) {
	body := `{"domain":"zipf","descriptors":[{"entries":[{"key":"user","value":"` + key + `"}]}]}`
	resp, err := c.Post("http://"+addr+"/v1/allow", "application/json", strings.NewReader(body))
	if err != nil {
		return zipfDecision{}, err
	}
	defer resp.Body.Close()
	var out struct {
		Allowed          bool
		Limit, Remaining *int64
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return zipfDecision{}, fmt.Errorf("POST /v1/allow: status %d: %w", resp.StatusCode, err)
	}
	if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[out.Allowed]; resp.StatusCode != want ||
		out.Limit == nil || out.Remaining == nil {
		return zipfDecision{}, fmt.Errorf("POST /v1/allow: status %d, %+v", resp.StatusCode, out)
	}
	return zipfDecision{out.Allowed, usedShare(*out.Limit, *out.Remaining)}, nil
}

// proxyGet sends key's request through the proxy and reads its RateLimit
// fields.
func proxyGet(c *http.Client, addr, key string) (zipfDecision, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/items", nil)
	req.Header.Set("X-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return zipfDecision{}, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return zipfDecision{}, fmt.Errorf("GET /items: status %d", resp.StatusCode)
	}
	qs, err := headers.ParseQuotas(resp.Header.Get(headers.LimitField), resp.Header.Get(headers.PolicyField))
	if err != nil || len(qs) != 1 {
		return zipfDecision{}, fmt.Errorf("GET /items: status %d, quotas %+v: %v", resp.StatusCode, qs, err)
	}
	return zipfDecision{resp.StatusCode == http.StatusOK, usedShare(qs[0].Quota, qs[0].Remaining)}, nil
}

// usedShare is the share of limit used when remaining is left, as
// observe.Event.Used computes it.
func usedShare(limit, remaining int64) float64 {
	if limit <= 0 {
		return 0
	}
	return float64(limit-min(max(remaining, 0), limit)) / float64(limit)
}

// count is a key's true units by admitted or denied.
func (kt *keyTally) count(by string) int64 {
	if by == "denied" {
		return kt.denied
	}
	return kt.admitted
}

// checkTop reads s's top 10 by by and holds it to the tally: the list's
// total is every unit sent, exactly, each entry's true count lies within
// its stated errors (count − error to count + error_above: the latter is
// 0 unless the surface sampled its decisions, which it does above
// --observe-full-rate, so on a fast machine), and at least 9 of the 10
// are in the true top 10 (keys tied with the 10th are all in it: every
// key denied has admitted the limit) or, sampled, within their stated
// errors of the 10th (of 50,000 requests, 16 keys admit 333, the next 322
// and 321: sampling ranks them in any order).
func checkTop(t *testing.T, s zipfSurface, by string, tally map[string]*keyTally) {
	t.Helper()
	var top struct {
		Lists []struct {
			Total          int64
			SamplingPeriod int64 `json:"sampling_period"`
			Entries        []struct {
				Key          string
				Count, Error int64
				ErrorAbove   int64 `json:"error_above"` // above 0 when the counts were sampled
			}
		}
	}
	url := s.admin + "/admin/top?policy=" + s.policy + "&by=" + by + "&n=10"
	if code := adminJSON(t, url, s.token, &top); code != http.StatusOK || len(top.Lists) != 1 {
		t.Fatalf("GET %s: %d %+v, want one list", url, code, top)
	}
	truth := map[string]int64{}
	var total int64
	for k, kt := range tally {
		if c := kt.count(by); c > 0 {
			truth[s.keyName(k)] = c
			total += c
		}
	}
	counts := slices.SortedFunc(func(yield func(int64) bool) {
		for _, c := range truth {
			if !yield(c) {
				return
			}
		}
	}, func(a, b int64) int { return cmp.Compare(b, a) })
	want := min(10, len(counts))
	tenth := counts[want-1]
	list := top.Lists[0]
	if list.Total != total {
		t.Errorf("GET %s: total %d, the generator counted %d", url, list.Total, total)
	}
	if len(list.Entries) != want {
		t.Errorf("GET %s: %d entries, want %d", url, len(list.Entries), want)
	}
	hits := 0
	for _, e := range list.Entries {
		c := truth[e.Key]
		if c < e.Count-e.Error || c > e.Count+e.ErrorAbove {
			t.Errorf("GET %s: %s counted %d (error %d, above %d), the generator %d", url, e.Key, e.Count, e.Error, e.ErrorAbove, c)
		}
		// Sampled, keys closer than their stated errors cannot be told
		// apart: one within them of the 10th is as good as the 10th.
		if c >= tenth || e.ErrorAbove > 0 && c+e.Error+e.ErrorAbove >= tenth {
			hits++
		}
	}
	recall := float64(hits) / float64(want)
	t.Logf("top 10 by %s: recall %.2f (the 10th has %d, the first %d of %d units; sampling period %d)", by, recall, tenth, counts[0], total, list.SamplingPeriod)
	if recall < 0.9 {
		t.Errorf("GET %s: recall %.2f of the true top %d, want ≥ 0.9: %+v", url, recall, want, list.Entries)
	}
}

// checkNearLimit reads s's near-limit keys: exactly the keys whose last
// answer left them at 80% of the limit or more, each as used as that
// answer said.
func checkNearLimit(t *testing.T, s zipfSurface, tally map[string]*keyTally) {
	t.Helper()
	const n = 1000 // the list's bound, MaxNearLimit's default
	var nl nearList
	url := s.admin + "/admin/near-limit?policy=" + s.policy + "&n=" + strconv.Itoa(n)
	if code := adminJSON(t, url, s.token, &nl); code != http.StatusOK {
		t.Fatalf("GET %s: %d", url, code)
	}
	byName := map[string]*keyTally{}
	var want []string
	for k, kt := range tally {
		byName[s.keyName(k)] = kt
		if kt.lastUsed >= 0.8 {
			want = append(want, s.keyName(k))
		}
	}
	if len(want) > n {
		t.Fatalf("%d keys near the limit, more than the list's %d: the test's limit is too low", len(want), n)
	}
	var got []string
	for _, e := range nl.Entries {
		got = append(got, e.Key)
		kt := byName[e.Key]
		if e.Policy != s.policy || e.Limit != s.limit || kt == nil || math.Abs(e.Used-kt.lastUsed) > 1e-9 {
			t.Errorf("GET %s: %+v, the generator saw %+v", url, e, kt)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	t.Logf("%d keys near the limit", len(got))
	if !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("GET %s: keys %q, want %q", url, got, want)
	}
}

// seriesLine is a Prometheus text line of a floodgate_ series: its metric
// name and labels.
var seriesLine = regexp.MustCompile(`^(floodgate_[a-z0-9_]+?)(_bucket|_sum|_count)?(\{[^}]*\})? `)

// keyLabel finds a key of zipfSequence or distinctKeys in a label value,
// alone or in the surfaces' names for it (zipf/user=u1, proxy:u1).
var keyLabel = regexp.MustCompile(`[=":][um][0-9]+"`)

// checkSeries reads s's /metrics after keys distinct keys: a few hundred
// floodgate_* series at most, none naming a key. It returns the names of
// the decision metrics (floodgate_decision*, floodgate_near_limit*,
// floodgate_store_duration*) that have series, sorted.
func checkSeries(t *testing.T, s zipfSurface, keys int) []string {
	t.Helper()
	resp, body := get(t, s.admin+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %d", s.admin, resp.StatusCode)
	}
	series := 0
	names, ofPolicy := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		m := seriesLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		series++
		if strings.HasPrefix(m[1], "floodgate_decision") || strings.HasPrefix(m[1], "floodgate_near_limit") || strings.HasPrefix(m[1], "floodgate_store_duration") {
			names[m[1]] = true
			ofPolicy[m[1]] = ofPolicy[m[1]] || strings.Contains(m[3], `policy="`+s.policy+`"`)
		}
		if keyLabel.MatchString(m[3]) {
			t.Errorf("GET %s/metrics: a key in a label: %s", s.admin, l)
		}
	}
	t.Logf("%d floodgate_* series after %d distinct keys", series, keys)
	if series == 0 || series > zipfMaxSeries {
		t.Errorf("GET %s/metrics: %d floodgate_* series after %d distinct keys, want 1 to %d:\n%s", s.admin, series, keys, zipfMaxSeries, metricLines(body))
	}
	for _, want := range []string{"floodgate_decisions_total", "floodgate_near_limit_total", "floodgate_decision_duration_seconds", "floodgate_store_duration_seconds"} {
		if !ofPolicy[want] {
			t.Errorf("GET %s/metrics: no %s of policy %q in:\n%s", s.admin, want, s.policy, metricLines(body))
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
}
