package server

import (
	"net/http"

	"github.com/floodgate-io/floodgate/cmd/internal/engine"
)

// adjustBody is the body of POST /v1/adjust: a policy lookup's domain and
// descriptors, and what to move their limits by after the fact: cost for
// every limit that counts units, a descriptor's costs for the limits it
// names. Positive amounts charge (past the limit if need be), negative
// ones give back (never below empty); limits that count requests move
// only when named.
type adjustBody struct {
	Domain      *string          `json:"domain"`
	Descriptors []descriptorJSON `json:"descriptors"`
	Cost        *int64           `json:"cost"`
}

// adjustResponse is the answer of POST /v1/adjust: each descriptor's
// limits after the adjustment.
type adjustResponse struct {
	Descriptors []descriptorStatus `json:"descriptors"`
}

// decodeAdjust reads and validates a /v1/adjust body. Every error it
// returns is an *httpError with status 400.
func decodeAdjust(body []byte) (engine.Request, error) {
	var b adjustBody
	if err := decodeJSON(body, &b); err != nil {
		return engine.Request{}, err
	}
	domain := ""
	if b.Domain != nil {
		domain = *b.Domain
	}
	descs, err := toDescriptors(domain, b.Descriptors)
	if err != nil {
		return engine.Request{}, err
	}
	cost := int64(0)
	if b.Cost != nil {
		cost = *b.Cost
	}
	if cost < -engine.MaxHits || cost > engine.MaxHits {
		return engine.Request{}, badRequest("cost %d outside [-%d, %d]", cost, int64(engine.MaxHits), int64(engine.MaxHits))
	}
	named := false
	for i := range descs {
		d := &descs[i]
		named = named || len(d.Costs) > 0
		refunds, charges := cost < 0, cost > 0
		for _, c := range d.Costs {
			refunds, charges = refunds || c < 0, charges || c > 0
		}
		if refunds && charges {
			return engine.Request{}, badRequest("descriptors[%d] both charges and gives back units: send the charges and the refunds as two descriptors", i)
		}
		d.Hits, d.HitsSet = abs(cost), true
		d.Refund, d.Charge = refunds, !refunds
		if refunds {
			positive := make(map[string]int64, len(d.Costs))
			for name, c := range d.Costs {
				positive[name] = abs(c)
			}
			d.Costs = positive
		}
	}
	if b.Cost == nil && !named {
		return engine.Request{}, badRequest("nothing to adjust: give cost (units to charge, negative to give back) or a descriptor's costs by limit name")
	}
	return engine.Request{Domain: domain, Descriptors: descs, Atomic: true}, nil
}

func abs(n int64) int64 { return max(n, -n) }

func (s *Server) handleAdjust(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := decodeAdjust(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req.Client = clientOf(r)
	resp, err := s.decide(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer resp.Release() // statusesOf copies from it
	writeJSON(w, http.StatusOK, adjustResponse{Descriptors: statusesOf(resp)})
}
