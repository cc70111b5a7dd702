package failover_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The redis-server helper keeps one goroutine locked to the thread that
// starts servers (see internal/testkit), and toxiproxy's pipe goroutines
// can outlive a stopped proxy by a moment (they are the fault injector's);
// everything else must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/floodgate-io/floodgate/internal/testkit.spawner"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic.func1"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).server"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).freeBlocker"))
}
