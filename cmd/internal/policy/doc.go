// Package policy is the run-time model of Floodgate's limits: a Set of
// domains, each a tree of descriptors with their rules, and the matcher that
// answers, for a request's descriptors, which rules apply and under which
// keys they count. The engine, the service, the proxy and the metrics use it
// on every request; nothing here reads a file.
//
// Values come from the policy decoder (cmd/internal/config), which reads the
// YAML language, checks it and calls New and Policy.WithRoutes; they do not
// change afterwards, so any number of goroutines may match against a Set.
//
// # Matching
//
// A request carries descriptors, each an ordered list of (key, value)
// entries; each descriptor is matched on its own, as envoyproxy/ratelimit
// does. The entries walk the tree one level each. At each level the entry
// takes, in this order: the descriptor with the same key and value; else the
// first descriptor, in file order, with the same key and a wildcard value the
// entry's value matches (each "*" of a wildcard, at the end, in the middle
// or several, stands for any run of characters, the empty one included; a
// trailing wildcard written before a middle one is tried first, whichever
// is longer); else the descriptor with the same key and no value. The walk never backtracks: when the chosen descriptor has no child
// for the next entry, nothing applies, even if another branch would have
// matched. The limits that apply are those of the descriptor reached by the
// last entry: a request with fewer entries stops above deeper limits, one
// with more entries goes past a limit set on an intermediate level, and in
// both cases that limit does not apply.
//
// # Routes
//
// A Route turns an HTTP request into a domain's descriptors and a cost for
// `floodgate proxy`: the first route, in load order, whose host, path and
// method the request has (see Set.RouteFor and Route.Request).
package policy
