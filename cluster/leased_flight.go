package cluster

import "sync"

// flightGroup counts the goroutines of renewals in flight, so that Close
// can wait for them, and refuses new ones once closed (a WaitGroup may not
// gain members while it is being waited for).
type flightGroup struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter admits one more flight, unless the group is closed.
func (g *flightGroup) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

func (g *flightGroup) leave() { g.wg.Done() }

// closeAndWait refuses new flights and waits for those in flight.
func (g *flightGroup) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
