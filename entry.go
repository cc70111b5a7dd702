package floodgate

import (
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/keytable"
)

// entry is one key's state and the compiled limit it was last decided under:
// the value of the key's slot in its shard's table. A sliding log, which
// needs lines of its own anyway, is the slot's cold value, so that the entry
// is keytable.LineValueBytes and a slot fits one cache line.
type entry struct {
	limit *compiledLimit
	state algo.State
}

// The shard tables and the views of them that the lock protocol hands out
// (see package keytable): every key's entry, and its sliding log beside it.
type (
	keys       = keytable.Table[entry, *algo.Log]
	lockedKeys = keytable.Locked[entry, *algo.Log]
	keyRef     = keytable.Ref[entry, *algo.Log]
)

// configure points the entry at a limit; a new algorithm starts fresh.
func (e *entry) configure(cl *compiledLimit, log **algo.Log) {
	if e.limit == nil || e.limit.params.Kind != cl.params.Kind {
		e.state, *log = algo.State{}, nil
	}
	e.limit = cl
}

// apply decides one request on the entry, whose sliding log is *log; with
// commit false the state stays as it was.
func (e *entry) apply(log **algo.Log, now, cost int64, commit bool, r *algo.Result) {
	p := &e.limit.params
	if p.Kind == algo.SlidingLog {
		if *log == nil {
			*log = new(algo.Log)
		}
		algo.DecideLog(p, *log, now, cost, commit, r)
		return
	}
	s := &e.state
	if !commit {
		scratch := e.state
		s = &scratch
	}
	algo.Decide(p, s, now, cost, r)
}

// fullAt returns when the key is back to a fresh key's state, as seen at at:
// at itself if it already is. It is derived rather than stored, which keeps
// a slot to one cache line; sweeps, its only users, are rare. A bucket whose
// horizon lies beyond at+MaxAhead reads as full early, so fullAt is a lower
// bound.
func (e *entry) fullAt(log **algo.Log, at int64) int64 {
	var r algo.Result
	e.apply(log, at, 0, false, &r)
	return at + r.ResetAfter
}
