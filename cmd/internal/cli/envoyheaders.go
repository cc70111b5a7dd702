package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/server"
)

// envoyHeaderFlags turn on envoyproxy/ratelimit's response headers
// (its LIMIT_RESPONSE_HEADERS_ENABLED and LIMIT_*_HEADER) on serve's
// Envoy surfaces, in place of RateLimit-Policy and RateLimit.
type envoyHeaderFlags struct {
	on    bool
	names server.EnvoyHeaders
}

func (f *envoyHeaderFlags) register(fl *pflag.FlagSet) {
	def := server.DefaultEnvoyHeaders()
	fl.BoolVar(&f.on, "envoy-limit-headers", false,
		"on the Envoy surfaces (gRPC, /json), add envoyproxy/ratelimit's headers (its LIMIT_RESPONSE_HEADERS_ENABLED: "+
			"the limit, the hits remaining and the seconds to the reset of the descriptor closest to its limit) "+
			"in place of RateLimit-Policy, RateLimit and Retry-After (--headers then does nothing there)")
	fl.StringVar(&f.names.Limit, "envoy-limit-header", def.Limit, "with --envoy-limit-headers, the name of the limit header (LIMIT_LIMIT_HEADER)")
	fl.StringVar(&f.names.Remaining, "envoy-remaining-header", def.Remaining, "with --envoy-limit-headers, the name of the remaining header (LIMIT_REMAINING_HEADER)")
	fl.StringVar(&f.names.Reset, "envoy-reset-header", def.Reset, "with --envoy-limit-headers, the name of the reset header (LIMIT_RESET_HEADER)")
}

// options is server.Options.EnvoyHeaders: nil when off, an error naming
// the flag for a name no header can have.
func (f envoyHeaderFlags) options() (*server.EnvoyHeaders, error) {
	if !f.on {
		return nil, nil
	}
	if err := f.names.Validate(); err != nil {
		return nil, fmt.Errorf("--envoy-limit-header, --envoy-remaining-header, --envoy-reset-header: %w", err)
	}
	names := f.names
	return &names, nil
}
