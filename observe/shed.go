package observe

import "context"

// ReportShed tells o of a request that was shed (refused to protect the
// server, not for its caller's quota) before any limit was decided: e,
// with its Outcome set to Shed, inside Begin and End as for a decided
// request, so that spans, metrics and logs see it. e.Latency is the time
// the request waited before it was shed. A nil o reports nothing.
func ReportShed(ctx context.Context, o Observer, e Event) {
	if o == nil {
		return
	}
	e.Outcome = Shed
	ctx = Begin(ctx, o, e.Surface, e.Policy)
	o.Observe(ctx, e)
	End(ctx, o, Summary{Policy: e.Policy, Outcome: Shed, Limits: 1, Latency: e.Latency})
}
