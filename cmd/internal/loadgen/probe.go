package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Matched asks the service once whether the run's policy lookup reaches a
// limit: the descriptor of the first key, with a cost of 0, which reads
// and counts nothing. A service answers a descriptor that no limit
// matches with OK (Envoy's rule), so a run on one is all allowed and
// measures a lookup, not a decision; the command line warns then. The
// explicit limits of --limit and gubernator's always apply: true.
func Matched(ctx context.Context, cfg Config) (bool, error) {
	p, err := cfg.resolve()
	if err != nil {
		return false, err
	}
	if p.limit != nil || p.Target == TargetGubernator {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	if p.Target == TargetHTTP {
		return matchedHTTP(ctx, p)
	}
	return matchedGRPC(ctx, p)
}

// matchedGRPC: a status with a current_limit is a limit that applied.
func matchedGRPC(ctx context.Context, p plan) (bool, error) {
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: p.Domain,
		Descriptors: []*corev3.RateLimitDescriptor{{Entries: []*corev3.RateLimitDescriptor_Entry{{Key: p.DescriptorKey, Value: "0"}}}}})
	if err != nil {
		return false, err
	}
	for _, s := range resp.GetStatuses() {
		if s.GetCurrentLimit() != nil {
			return true, nil
		}
	}
	return false, nil
}

// matchedHTTP: /v1/allow lists the limits that applied to each descriptor.
func matchedHTTP(ctx context.Context, p plan) (bool, error) {
	body, _ := json.Marshal(map[string]any{"domain": p.Domain, "cost": 0,
		"descriptors": []any{map[string]any{"entries": []any{map[string]string{"key": p.DescriptorKey, "value": "0"}}}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var answer struct {
		Descriptors []struct{ Limits []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return false, fmt.Errorf("POST %s: %s: %w", p.url, resp.Status, err)
	}
	for _, d := range answer.Descriptors {
		if len(d.Limits) > 0 {
			return true, nil
		}
	}
	return false, nil
}
