// Package bounds states, as functions, the worst-case error each strategy
// of package cluster documents in its constructor's doc comment (NewLocal,
// NewLeased, NewSynced, NewSampled, NewGossip), and answers the question
// the bounds exist for: given a tolerated overshoot, how long may the sync
// interval T be, and what does that T cost in shared-store calls.
//
// Every figure is in units per window of the limit's Period, the way the
// doc comments state them: Overshoot is admitted − R in the worst window,
// Undershoot the units of min(R, offered) denied in the worst window. The
// formulas are transcribed, not re-derived: where this package has to pick
// a free parameter the doc leaves open (sampled's gap g, the reference T
// of a strategy whose bound does not depend on T) its doc says which.
//
// The simulator (package sim) and the cluster tests measure the same
// quantities, so a measured figure above the bound here is a bug in one of
// the two, or in the stated bound.
package bounds
