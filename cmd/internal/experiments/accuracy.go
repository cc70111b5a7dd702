package experiments

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// ErrBadConfig is wrapped by every error an experiment's configuration
// check returns.
var ErrBadConfig = errors.New("experiments: bad configuration")

// AccuracyConfig sets up one [SlidingAccuracy] run. Every source has its own
// key with the same limit: Rate per Period.
type AccuracyConfig struct {
	Requests int64 // total requests in the trace, split over the sources by their rates
	Sources  int   // distinct keys (clients)
	Seed     uint64
	Rate     int64 // the limit: units per Period, for each source
	Period   time.Duration
	Shape    Shape
	// Workers decides sources in parallel; 0 means GOMAXPROCS. The result
	// does not depend on it.
	Workers int
}

// The trace starts at 2026-01-01T00:00:00Z, in µs since the epoch, a multiple
// of every whole-second period up to a day, so windows start where it does.
const traceStart = 1_767_225_600_000_000

// minSpanPeriods is the shortest trace SlidingAccuracy runs: the counter and
// the log differ around window boundaries, so a trace of a period or two,
// where every key starts empty, would hide most of what is measured.
const minSpanPeriods = 5

func (c AccuracyConfig) validate() error {
	switch {
	case c.Sources <= 0:
		return fmt.Errorf("%w: sources must be positive, got %d", ErrBadConfig, c.Sources)
	case c.Requests < int64(c.Sources):
		return fmt.Errorf("%w: requests (%d) must be at least the number of sources (%d)", ErrBadConfig, c.Requests, c.Sources)
	case c.Workers < 0:
		return fmt.Errorf("%w: workers must not be negative, got %d", ErrBadConfig, c.Workers)
	}
	if _, err := algo.Compile(algo.SlidingWindow.String(), c.Rate, c.Period, 0); err != nil {
		return fmt.Errorf("%w: limit %d per %s: %w", ErrBadConfig, c.Rate, c.Period, err)
	}
	return c.Shape.validate()
}

// span is how long the trace lasts: long enough that a median source,
// sending medianCount requests at Load times the limit rate, spans its count.
func (c AccuracyConfig) span(medianCount float64) time.Duration {
	periods := medianCount / (c.Shape.Load * float64(c.Rate))
	return time.Duration(periods * float64(c.Period)).Round(time.Microsecond)
}

// Disagreement counts the requests on which the sliding window counter and
// a reference decided differently.
type Disagreement struct {
	WronglyAllowed int64 `json:"wrongly_allowed"` // the counter allowed, the reference denied
	WronglyDenied  int64 `json:"wrongly_denied"`  // the counter denied, the reference allowed
}

// Total is every request on which the two disagreed.
func (d Disagreement) Total() int64 { return d.WronglyAllowed + d.WronglyDenied }

// AccuracyResult is what one [SlidingAccuracy] run measured. The counter's
// decisions are judged two ways (see SlidingAccuracy):
//
//   - Replay: against the exact sliding log deciding the same requests with
//     its own state (what a switch from one to the other would change).
//   - Shadow: against the exact rule applied to what the counter itself
//     admitted (how often the counter broke, or was stricter than, the rule
//     it approximates, on its own history).
type AccuracyResult struct {
	Shape          Shape         `json:"shape"`
	Requests       int64         `json:"requests"`
	Sources        int           `json:"sources"`
	Rate           int64         `json:"rate"`
	Period         time.Duration `json:"period_ns"`
	Span           time.Duration `json:"span_ns"`
	Seed           uint64        `json:"seed"`
	CounterAllowed int64         `json:"counter_allowed"`
	LogAllowed     int64         `json:"log_allowed"`
	Replay         Disagreement  `json:"replay"`
	Shadow         Disagreement  `json:"shadow"`
}

// Pct returns n as a percentage of the run's requests.
func (r AccuracyResult) Pct(n int64) float64 { return 100 * float64(n) / float64(r.Requests) }

// SlidingAccuracy generates a synthetic trace (see [Shape]; the same config
// gives the same trace) and decides every request of every source with
// algo's sliding window counter, committing what it admits. Each decision is
// compared with two references, both exact sliding-window rules ("at most
// Rate units in (now − Period, now]"):
//
//   - Replay: algo.DecideLog on a log that commits its own decisions. Once the
//     two disagree their histories differ, so later disagreements count the
//     divergence as well as the approximation.
//   - Shadow: the exact rule on the counter's own admitted history: "would
//     the log have admitted this, had it seen exactly what the counter
//     admitted?". Each disagreement is then the counter's error alone, the
//     method of the published production figure.
//
// Memory is one log and one history per worker at a time, each bounded by
// 2·Rate entries: sources are decided one after another.
func SlidingAccuracy(ctx context.Context, cfg AccuracyConfig) (AccuracyResult, error) {
	if err := cfg.validate(); err != nil {
		return AccuracyResult{}, err
	}
	counter, _ := algo.Compile(algo.SlidingWindow.String(), cfg.Rate, cfg.Period, 0)
	exact, _ := algo.Compile(algo.SlidingLog.String(), cfg.Rate, cfg.Period, 0)
	counts, median := sourceCounts(cfg.Seed, cfg.Sources, cfg.Requests, cfg.Shape.TailIndex)
	span := cfg.span(median)
	if span < minSpanPeriods*cfg.Period {
		return AccuracyResult{}, fmt.Errorf("%w: the trace would last %s, under %d periods of %s: "+
			"ask for more requests per source or a lower load", ErrBadConfig, span, minSpanPeriods, cfg.Period)
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, cfg.Sources)
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tallies[w] = runSources(ctx, &cfg, &counter, &exact, counts, span, w, workers)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return AccuracyResult{}, fmt.Errorf("experiments: sliding accuracy stopped: %w", err)
	}
	var sum tally
	for _, t := range tallies {
		sum.add(t)
	}
	return AccuracyResult{
		Shape: cfg.Shape, Requests: cfg.Requests, Sources: cfg.Sources, Rate: cfg.Rate,
		Period: cfg.Period, Span: span, Seed: cfg.Seed,
		CounterAllowed: sum.counterAllowed, LogAllowed: sum.logAllowed,
		Replay: sum.replay, Shadow: sum.shadow,
	}, nil
}

// tally is one worker's counts; counts add up the same in any order, so the
// result does not depend on how sources were spread over workers.
type tally struct {
	counterAllowed, logAllowed int64
	replay, shadow             Disagreement
}

func (t *tally) add(o tally) {
	t.counterAllowed += o.counterAllowed
	t.logAllowed += o.logAllowed
	t.replay.WronglyAllowed += o.replay.WronglyAllowed
	t.replay.WronglyDenied += o.replay.WronglyDenied
	t.shadow.WronglyAllowed += o.shadow.WronglyAllowed
	t.shadow.WronglyDenied += o.shadow.WronglyDenied
}

// runSources decides the sources w, w+workers, w+2·workers, …, each from its
// own random stream, so a source's trace does not depend on the worker.
func runSources(ctx context.Context, cfg *AccuracyConfig, counter, exact *algo.Params, counts []int64,
	spanDuration time.Duration, w, workers int) tally {
	var (
		t      tally
		times  []int64
		phases []float64
	)
	span := float64(spanDuration / time.Microsecond)
	onMean := float64(cfg.Period / time.Microsecond)
	for i := w; i < len(counts); i += workers {
		if i%1024 == w && ctx.Err() != nil {
			return t
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))
		times, phases = arrivals(rng, times, phases, counts[i], traceStart, span, onMean, cfg.Shape.DutyCycle)
		t.add(judgeSource(counter, exact, times))
	}
	return t
}

// judgeSource decides one source's unit requests (ascending times, µs)
// with the counter and both references.
func judgeSource(counter, exact *algo.Params, times []int64) tally {
	var (
		t       tally
		state   algo.State
		log     algo.Log
		history admittedWindow
		r       algo.Result
	)
	for _, now := range times {
		algo.Decide(counter, &state, now, 1, &r)
		byCounter := r.Allowed
		algo.DecideLog(exact, &log, now, 1, true, &r)
		byLog := r.Allowed
		byRule := history.admits(now, exact.Period, exact.Rate, 1)
		if byCounter {
			t.counterAllowed++
			history.record(now, 1)
		}
		if byLog {
			t.logAllowed++
		}
		t.replay.count(byCounter, byLog)
		t.shadow.count(byCounter, byRule)
	}
	return t
}

func (d *Disagreement) count(byCounter, byReference bool) {
	switch {
	case byCounter && !byReference:
		d.WronglyAllowed++
	case !byCounter && byReference:
		d.WronglyDenied++
	}
}
