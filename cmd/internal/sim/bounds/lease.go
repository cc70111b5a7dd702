package bounds

import (
	"math"
	"time"
)

// Lease is what leased hands a node for p, at the start of a window, when
// every one of the N nodes reports the same demand.
type Lease struct {
	// Units a node may admit before it renews: its share of the window's
	// budget by the coordinator's water-filling.
	Units int64
	// Demand is what each node reports: its arrivals per T, λ·T rounded up
	// and capped at R (leased's demand rule).
	Demand int64
	// Valid is how long a lease lasts: 1.5·T (cut at the window's end),
	// so that the renewal every T lands before it runs out.
	Valid time.Duration
}

// LeaseSize is the lease leased grants for p, following the coordinator's
// rule (cluster's leaseRenewBook and leaseWaterfill): when the N demands d
// fit in the window's free budget R, each node gets d plus an equal part
// of what is left over, d + ⌊(R − N·d)/N⌋; when they do not, each gets the
// common level ⌊R/N⌋. Under even load both are ⌊R/N⌋ whatever T is: T
// sets how long a lease lasts and how often it is topped up, not its size.
// Later renewals in the window share what is still free the same way.
func LeaseSize(p Params) (Lease, error) {
	if err := p.validate(Leased); err != nil {
		return Lease{}, err
	}
	r, n := p.Limit.Rate, int64(p.Nodes)
	perT := math.Ceil(p.ArrivalRate * p.Interval.Seconds())
	d := int64(math.Min(perT, float64(r)))
	units := r / n // the level when the demands do not fit
	if d <= r/n {  // n·d ≤ r, without overflow
		units = d + (r-n*d)/n
	}
	return Lease{Units: units, Demand: d, Valid: p.Interval + p.Interval/2}, nil
}
