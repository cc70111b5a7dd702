package proxy

import (
	"strconv"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// verdict is an engine response as the proxy answers it: only enforcing
// limits count (shadow and quota-mode limits report to the engine's
// caller, not to the client).
type verdict struct {
	allowed    bool
	combined   floodgate.Decision // of the enforcing limits
	quotas     []headers.Quota    // one per enforcing limit, for the RateLimit fields
	names      []string           // of the enforcing limits
	violated   []string           // names of the limits that denied
	retryAfter time.Duration      // the longest wait among them
	never      bool               // one of them can never pass
}

func verdictOf(resp engine.Response) verdict {
	v := verdict{allowed: resp.Code == engine.OK}
	var enforced []floodgate.Decision
	for _, ds := range resp.Descriptors {
		for _, ls := range ds.Limits {
			if ls.Rule.ShadowMode || ls.Rule.QuotaMode {
				continue
			}
			d := ls.Decision
			name := limitName(ls.Rule)
			q := headers.QuotaOf(name, ls.Limit, d)
			// A denied batch gives RetryAfter 0 to the limits that did not
			// deny: only the others are to blame.
			if blamed := !d.Allowed && d.RetryAfter != 0; blamed {
				v.violated = append(v.violated, name)
				if d.RetryAfter < 0 {
					v.never = true
				} else {
					q.Reset = d.RetryAfter // t is this policy's wait
					v.retryAfter = max(v.retryAfter, d.RetryAfter)
				}
			}
			enforced = append(enforced, d)
			v.quotas = append(v.quotas, q)
			v.names = append(v.names, name)
		}
	}
	v.combined = floodgate.Combine(enforced)
	return v
}

// limitName names a limit in the RateLimit fields and in the 429 body:
// its name, else its place in the policy ("api.tenant.user", with "#i"
// among several limits of one descriptor).
func limitName(r policy.Rule) string {
	switch {
	case r.Name != "":
		return r.Name
	case r.Count > 1:
		return r.Path + "#" + strconv.Itoa(r.Index)
	}
	return r.Path
}
