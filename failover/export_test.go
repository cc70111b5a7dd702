package failover

// coreOf is the core under any Limiter New returns.
func coreOf(l Limiter) *core {
	switch l := l.(type) {
	case *core:
		return l
	case batching:
		return l.core
	case adjusting:
		return l.core
	case batchingAdjusting:
		return l.core
	}
	panic("failover: not a Limiter of New")
}

func (r result) degraded() bool      { return r.cause != nil }
func (r batchResult) degraded() bool { return r.cause != nil }
