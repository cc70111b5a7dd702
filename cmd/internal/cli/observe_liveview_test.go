package cli

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate/cmd/internal/liveview/livetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// busyShopPolicy allows 50 requests a second per user.
const busyShopPolicy = `domain: shop
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: second, requests_per_unit: 50}
`

// The live view of a real floodgate serve, in a real browser, while Envoy
// asks it over gRPC: the shop policy's row shows decisions per second, its
// totals move, mallory is the top denied key and the store is memory.
func TestServeLiveViewInABrowser(t *testing.T) {
	browser := livetest.FindBrowser(t)
	httpAddr, grpcAddr, _ := startServe(t, "--config", writePolicy(t, busyShopPolicy), "--admin-token", "T")
	loadShop(t, grpcAddr)
	ctx := livetest.OpenBrowser(t, browser)
	console := livetest.WatchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+httpAddr+"/admin/ui/?refresh=0.25#token=T")); err != nil {
		t.Fatal(err)
	}
	first := livetest.WaitFor(t, ctx, "the shop policy's decisions per second, mallory the top denied key and the memory store",
		`num(row("shop")[1]) > 0 && v.topDenied.length && v.topDenied[0][0] === "shop/user=mallory" && v.store === "memory"`)
	allowed := first.Policies["shop"][4]
	livetest.WaitFor(t, ctx, "the shop policy's allowed total to change",
		fmt.Sprintf(`row("shop")[4] !== %q && num(row("shop")[1]) > 0`, allowed))
	for _, m := range livetest.Problems(console.Stop()) {
		t.Errorf("console: %s (%s:%d)", m, m.URL, m.Line)
	}
}

// loadShop asks serve over gRPC until the test ends, in rounds 20 times a
// second: mallory 4 times a round (80/s against 50/s: denied), bob once.
func loadShop(t *testing.T, grpcAddr string) {
	t.Helper()
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	client := pb.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); conn.Close() })
	ask := func(user string) {
		ctx, cancel := context.WithTimeout(ctx, timing.Patience)
		defer cancel()
		_, _ = client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "shop",
			Descriptors: []*rlsv3.RateLimitDescriptor{{Entries: []*rlsv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}}}})
	}
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, user := range []string{"mallory", "mallory", "mallory", "mallory", "bob"} {
				ask(user)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}
