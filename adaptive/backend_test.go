package adaptive

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// simBackend is a backend on a virtual clock, driven in a closed loop far
// above its capacity: whenever fewer than the algorithm's limit are in
// flight, another request arrives at once. Requests wait in a FIFO queue
// for one of workers(n) parallel workers (n is the number of samples so
// far, so that capacity can change mid-run); each takes service·U(1−jitter,
// 1+jitter), times slower(n) when set. RTT = queue wait + service time; a request whose RTT is above
// timeout is Dropped. Deterministic for a seed.
type simBackend struct {
	workers func(n int) int
	slower  func(n int) float64
	service time.Duration
	jitter  float64
	timeout time.Duration
	rng     *rand.Rand

	now      time.Time
	inFlight int
	busy     int
	queue    []simRequest
	running  simHeap
	lastN    int
}

type simRequest struct {
	admitted time.Time
	inFlight int
	done     time.Time
}

// simRun is what a run recorded, one entry per sample: the limit, the
// limit learnt (the limit but for probes, which lower it for a moment by
// design), and the RTT.
type simRun struct {
	limits, learnt []int
	rtts           []time.Duration
}

// learnt is the limit an algorithm has learnt, probes aside.
func learnt(alg Algorithm) int {
	switch a := alg.(type) {
	case *Gradient2:
		return int(a.limit)
	case *Vegas:
		return int(a.limit)
	}
	return alg.Limit()
}

func newSimBackend(seed uint64, service time.Duration, workers func(n int) int) *simBackend {
	return &simBackend{
		workers: workers, service: service, jitter: 0.1, timeout: 5 * service,
		rng: rand.New(rand.NewPCG(seed, seed)), now: time.Unix(1_700_000_000, 0),
	}
}

// run feeds a samples to alg and records the limit after each.
func (b *simBackend) run(alg Algorithm, samples int) simRun {
	r := simRun{limits: make([]int, 0, samples), rtts: make([]time.Duration, 0, samples)}
	b.admit(alg.Limit())
	for len(r.limits) < samples {
		req := heap.Pop(&b.running).(simRequest)
		b.now, b.busy, b.inFlight = req.done, b.busy-1, b.inFlight-1
		rtt := req.done.Sub(req.admitted)
		limit := alg.Update(Sample{RTT: rtt, InFlight: req.inFlight, Dropped: rtt > b.timeout, At: b.now})
		r.limits, r.rtts = append(r.limits, limit), append(r.rtts, rtt)
		r.learnt = append(r.learnt, learnt(alg))
		b.startWork(len(r.limits))
		b.admit(limit)
	}
	return r
}

// admit lets requests in up to limit, then starts what workers are free.
func (b *simBackend) admit(limit int) {
	for b.inFlight < limit {
		b.inFlight++
		b.queue = append(b.queue, simRequest{admitted: b.now, inFlight: b.inFlight})
	}
	b.startWork(-1)
}

// startWork gives queued requests to free workers; n < 0 keeps the last
// worker count.
func (b *simBackend) startWork(n int) {
	if n >= 0 {
		b.lastN = n
	}
	for len(b.queue) > 0 && b.busy < b.workers(b.lastN) {
		req := b.queue[0]
		b.queue = b.queue[1:]
		f := 1 + b.jitter*(2*b.rng.Float64()-1)
		if b.slower != nil {
			f *= b.slower(b.lastN)
		}
		req.done = b.now.Add(time.Duration(float64(b.service) * f))
		b.busy++
		heap.Push(&b.running, req)
	}
}

type simHeap []simRequest

func (h simHeap) Len() int           { return len(h) }
func (h simHeap) Less(i, j int) bool { return h[i].done.Before(h[j].done) }
func (h simHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simHeap) Push(x any)        { *h = append(*h, x.(simRequest)) }
func (h *simHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// percentile is the p-quantile (0..1) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// meanStd is the mean and standard deviation of xs.
func meanStd(xs []int) (mean, std float64) {
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := float64(x) - mean
		std += d * d
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}
