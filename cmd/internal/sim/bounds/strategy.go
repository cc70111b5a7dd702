package bounds

import (
	"errors"
	"fmt"
	"strings"
)

// The strategies this package knows, named as in cluster's doc comment and
// in the policy language.
const (
	Exact   = "exact"
	Local   = "local"
	Leased  = "leased"
	Synced  = "synced"
	Sampled = "sampled"
	Gossip  = "gossip"
)

// Strategies lists every strategy in the order tables print them: from
// the one that pays a store call per decision to the one with no store.
func Strategies() []string {
	return []string{Exact, Local, Leased, Synced, Sampled, Gossip}
}

// ErrUnknownStrategy is wrapped by the error a function gives for a
// strategy name it does not know.
var ErrUnknownStrategy = errors.New("bounds: unknown strategy")

// ErrInvalidParams is wrapped by the errors that name a bad field of
// Params or a bad tolerance.
var ErrInvalidParams = errors.New("bounds: invalid params")

// checkStrategy returns an error naming s when it is not a strategy.
func checkStrategy(s string) error {
	for _, known := range Strategies() {
		if s == known {
			return nil
		}
	}
	return fmt.Errorf("%w %q (want one of %s)", ErrUnknownStrategy, s, strings.Join(Strategies(), ", "))
}

// invalid builds an error wrapping ErrInvalidParams.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...)
}
