package cli

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/gcfloor"
)

// defaultGCFloorMiB is serve's and proxy's heap floor: what a small
// service's collector may let the heap grow to before it collects (see
// package gcfloor; measured in docs/benchmarks.md and docs/operations.md:
// 128 MiB against 64 gave 13% more decisions a second and a 20% lower p99,
// mostly by scanning the stream workers' stacks half as often).
const defaultGCFloorMiB = 128

// gcFloorFlag is --gc-heap-floor-mib: 0 or a positive number of MiB.
type gcFloorFlag struct{ mib int }

func (g *gcFloorFlag) String() string { return strconv.Itoa(g.mib) }
func (g *gcFloorFlag) Type() string   { return "int" }

func (g *gcFloorFlag) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 1<<20 {
		return fmt.Errorf("%q: want a whole number of MiB from 0 (off) to 1048576", s)
	}
	g.mib = v
	return nil
}

func (g *gcFloorFlag) register(fl *pflag.FlagSet) {
	g.registerFor(fl, "fewer collections for a service that keeps little and allocates per request")
}

// registerFor registers the flag with why a floor helps this command.
func (g *gcFloorFlag) registerFor(fl *pflag.FlagSet, why string) {
	g.mib = defaultGCFloorMiB
	fl.Var(g, "gc-heap-floor-mib", "the heap the garbage collector may grow to before it collects, however little is live, in MiB "+
		"(0: Go's default, GOGC alone): "+why+"; GOGC and GOMEMLIMIT still apply")
}

// start applies the floor until the returned stop is called.
func (g *gcFloorFlag) start(log *slog.Logger) (stop func()) {
	if g.mib > 0 {
		log.Debug("gc heap floor", "mib", g.mib)
	}
	return gcfloor.Start(uint64(g.mib) << 20)
}
