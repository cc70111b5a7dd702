// Command floodgate runs the Floodgate rate limiter: as a service, a gateway,
// a simulator and a load generator. See the README for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/floodgate-io/floodgate/cmd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
