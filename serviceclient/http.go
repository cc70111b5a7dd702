package serviceclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// maxAnswerBytes bounds what the client reads of an answer: the service's
// largest (64 descriptors of a few limits each) is a few tens of KB.
const maxAnswerBytes = 1 << 20

// allowRequest is the body of POST /v1/allow, as the service reads it.
type allowRequest struct {
	Key         string           `json:"key,omitempty"`
	Limit       *limitJSON       `json:"limit,omitempty"`
	Domain      string           `json:"domain,omitempty"`
	Descriptors []descriptorJSON `json:"descriptors,omitempty"`
	Cost        int64            `json:"cost"`
}

type limitJSON struct {
	Algorithm string `json:"algorithm"`
	Rate      int64  `json:"rate"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst,omitempty"`
}

type descriptorJSON struct {
	Entries []Entry          `json:"entries"`
	Costs   map[string]int64 `json:"costs,omitempty"`
}

// allowAnswer is the service's answer to POST /v1/allow.
type allowAnswer struct {
	Allowed      bool               `json:"allowed"`
	Limit        *int64             `json:"limit"`
	Remaining    *int64             `json:"remaining"`
	RetryAfterMS int64              `json:"retry_after_ms"`
	ResetAfterMS int64              `json:"reset_after_ms"`
	DelayMS      int64              `json:"delay_ms"`
	Descriptors  []descriptorAnswer `json:"descriptors"`
	Error        string             `json:"error"`

	// The RateLimit and RateLimit-Policy fields, which state each
	// enforced limit's window (the JSON gives only its capacity).
	rateLimit, rateLimitPolicy string
}

type descriptorAnswer struct {
	Code   string        `json:"code"`
	Limits []limitAnswer `json:"limits"`
}

type limitAnswer struct {
	Name         string `json:"name"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	Shadow       bool   `json:"shadow"`
}

// allowHTTP asks POST /v1/allow for an explicit limit.
func (c *Client) allowHTTP(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	body := allowRequest{Key: key, Cost: cost, Limit: &limitJSON{
		Algorithm: string(limit.Algorithm), Rate: limit.Rate, Period: limit.Period.String(), Burst: limit.Burst}}
	a, err := c.post(ctx, body)
	if err != nil {
		return floodgate.Decision{}, err
	}
	d := floodgate.Decision{Allowed: a.Allowed, RetryAfter: msDuration(a.RetryAfterMS),
		ResetAfter: msDuration(a.ResetAfterMS), Delay: msDuration(a.DelayMS)}
	if a.Limit != nil {
		d.Limit = *a.Limit
	}
	if a.Remaining != nil {
		d.Remaining = *a.Remaining
	}
	return d, nil
}

// decideHTTP asks POST /v1/allow for a policy lookup.
func (c *Client) decideHTTP(ctx context.Context, domain string, descs []Descriptor, cost int64) (Result, error) {
	body := allowRequest{Domain: domain, Cost: cost, Descriptors: make([]descriptorJSON, len(descs))}
	for i, d := range descs {
		body.Descriptors[i] = descriptorJSON(d)
	}
	a, err := c.post(ctx, body)
	if err != nil {
		return Result{}, err
	}
	if len(a.Descriptors) != len(descs) {
		return Result{}, unavailable(fmt.Errorf("the service answered %d descriptors for %d", len(a.Descriptors), len(descs)))
	}
	r := Result{Allowed: a.Allowed, Descriptors: make([]DescriptorResult, len(descs))}
	for i, da := range a.Descriptors {
		r.Descriptors[i] = da.result()
	}
	c.learned.learnHTTP(domain, descs, a)
	return r, nil
}

// result is one descriptor's answer: its tightest enforced limit (the one
// with the least remaining) and the longest wait among its denied limits.
func (da descriptorAnswer) result() DescriptorResult {
	r := DescriptorResult{Allowed: da.Code != "OVER_LIMIT"}
	for _, l := range da.Limits {
		if l.Shadow {
			continue
		}
		if !r.Limited || l.Remaining < r.Remaining {
			r.Limited, r.Name, r.Limit, r.Remaining = true, l.Name, l.Limit, l.Remaining
		}
		r.ResetAfter = max(r.ResetAfter, msDuration(l.ResetAfterMS))
		if l.RetryAfterMS < 0 || r.RetryAfter < 0 {
			r.RetryAfter = -1
		} else {
			r.RetryAfter = max(r.RetryAfter, msDuration(l.RetryAfterMS))
		}
	}
	return r
}

// post sends body to /v1/allow within the timeout and decodes the answer:
// 200 and 429 are decisions, other 4xx ErrRejected, anything else (and no
// answer) the service unavailable.
func (c *Client) post(ctx context.Context, body allowRequest) (allowAnswer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return allowAnswer{}, fmt.Errorf("serviceclient: encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/allow", bytes.NewReader(b))
	if err != nil {
		return allowAnswer{}, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return allowAnswer{}, unavailable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return allowAnswer{}, unavailable(fmt.Errorf("reading the answer: %w", err))
	}
	var a allowAnswer
	decodeErr := json.Unmarshal(raw, &a)
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests:
		if decodeErr != nil {
			return allowAnswer{}, unavailable(fmt.Errorf("malformed answer (HTTP %d): %w", resp.StatusCode, decodeErr))
		}
		a.rateLimit, a.rateLimitPolicy = resp.Header.Get(headers.LimitField), resp.Header.Get(headers.PolicyField)
		return a, nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return allowAnswer{}, fmt.Errorf("%w: HTTP %d: %s", ErrRejected, resp.StatusCode, a.Error)
	}
	return allowAnswer{}, unavailable(fmt.Errorf("HTTP %d: %s", resp.StatusCode, a.Error))
}

// msDuration is a whole number of milliseconds as the service writes them
// (-1: never).
func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}
