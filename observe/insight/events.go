package insight

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Event is something that changed, worth an operator's attention: a spike
// Insight saw, or what its owner records (a configuration reload, a
// breaker opening).
type Event struct {
	// Kind names what happened, in snake_case: KindSpikeStart,
	// KindSpikeEnd, or the owner's ("config_reload", "breaker_open").
	Kind string `json:"kind"`
	// Policy is the policy it concerns, or "" for the whole server.
	Policy string `json:"policy,omitempty"`
	// Message says it in a sentence.
	Message string `json:"message"`
	// Fields carries its figures, for machines.
	Fields map[string]any `json:"fields,omitempty"`
}

// EventRecord is an Event as the ring keeps it.
type EventRecord struct {
	// Seq numbers the events Insight has recorded, from 1.
	Seq uint64 `json:"seq"`
	// Time is when it happened, by Options.Clock.
	Time time.Time `json:"time"`
	Event
}

// Record adds e to the ring of recent events, at the clock's time, and
// hands it to Options.OnEvent. An event without a Kind is refused.
func (in *Insight) Record(e Event) error {
	if e.Kind == "" {
		return fmt.Errorf("insight: Record: the event has no Kind (message %q)", e.Message)
	}
	in.events.add(EventRecord{Time: in.clock.Now(), Event: e}, in.opts.OnEvent)
	return nil
}

// eventRing keeps the last len(buf) events. Events are rare, so one lock
// serves every policy.
type eventRing struct {
	mu   sync.Mutex
	buf  []EventRecord
	next uint64 // the Seq of the next event
}

func (r *eventRing) add(rec EventRecord, hook func(EventRecord)) {
	r.mu.Lock()
	r.next++
	rec.Seq = r.next
	r.buf[(rec.Seq-1)%uint64(len(r.buf))] = rec
	r.mu.Unlock()
	if hook != nil {
		hook(rec)
	}
}

// last returns up to n events at or after since, newest first.
func (r *eventRing) last(since time.Time, n int) []EventRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []EventRecord{}
	held := min(r.next, uint64(len(r.buf)))
	for i := uint64(0); i < held && len(out) < n; i++ {
		rec := r.buf[(r.next-1-i)%uint64(len(r.buf))]
		if rec.Time.Before(since) {
			continue // the clock may have gone back: look at every event
		}
		out = append(out, rec)
	}
	return out
}

// spikeEvent describes a detector's change of state.
func spikeEvent(policy, signal string, n spikeNote) Event {
	f := map[string]any{"signal": signal, "rate": n.rate, "baseline_mean": round(n.mean), "z": round(n.z)}
	if n.start {
		return Event{Kind: KindSpikeStart, Policy: policy, Fields: f, Message: fmt.Sprintf(
			"policy %q: %s at %.0f/s, %.1f standard deviations above its baseline of %.1f/s",
			policy, signal, n.rate, n.z, n.mean)}
	}
	f["peak"], f["seconds"] = n.peak, n.lasted
	msg := fmt.Sprintf("policy %q: %s back to %.0f/s after %d s (peak %.0f/s)", policy, signal, n.rate, n.lasted, n.peak)
	if n.newNormal {
		f["new_baseline"] = true
		delete(f, "z")
		msg = fmt.Sprintf("policy %q: %s has stayed at %.0f/s for %d s: taken as the new baseline", policy, signal, n.rate, n.lasted)
	}
	return Event{Kind: KindSpikeEnd, Policy: policy, Message: msg, Fields: f}
}

// round keeps two decimals, for figures meant for people.
func round(f float64) float64 { return math.Round(f*100) / 100 }
