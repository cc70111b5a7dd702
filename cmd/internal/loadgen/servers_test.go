package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// rlsServer is a real RateLimitService: it answers OVER_LIMIT to every third
// call and rejects with InvalidArgument any request that is not shaped as
// the run was configured, so that a malformed request shows up as an error
// in the report.
type rlsServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	domain, key string
	keys        int
	hits        uint32

	calls atomic.Int64
	mu    sync.Mutex
	peers map[string]bool
	times []time.Time

	// The first gathering calls wait until that many have arrived; gathered
	// is closed then. See gather.
	gathering, arrived int
	gathered           chan struct{}
}

// gather makes the first n calls wait for each other: a run with n workers
// then has each worker make one of them. Call it before the run.
func (s *rlsServer) gather(n int) {
	s.gathering, s.gathered = n, make(chan struct{})
}

// await holds one of the first s.gathering calls until all have arrived.
func (s *rlsServer) await(ctx context.Context) error {
	if s.gathering == 0 {
		return nil
	}
	s.mu.Lock()
	s.arrived++
	n := s.arrived
	if n == s.gathering {
		close(s.gathered)
	}
	s.mu.Unlock()
	if n > s.gathering {
		return nil
	}
	select {
	case <-s.gathered:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (s *rlsServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.check(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.Lock()
	if p, ok := peer.FromContext(ctx); ok {
		s.peers[p.Addr.String()] = true
	}
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	code := rlsv3.RateLimitResponse_OK
	if s.calls.Add(1)%3 == 0 {
		code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return &rlsv3.RateLimitResponse{OverallCode: code}, nil
}

func (s *rlsServer) check(req *rlsv3.RateLimitRequest) error {
	if req.GetDomain() != s.domain {
		return fmt.Errorf("domain %q, want %q", req.GetDomain(), s.domain)
	}
	if req.GetHitsAddend() != s.hits {
		return fmt.Errorf("hits_addend %d, want %d", req.GetHitsAddend(), s.hits)
	}
	ds := req.GetDescriptors()
	if len(ds) != 1 || len(ds[0].GetEntries()) != 1 {
		return fmt.Errorf("want one descriptor with one entry, got %v", ds)
	}
	e := ds[0].GetEntries()[0]
	if e.GetKey() != s.key {
		return fmt.Errorf("entry key %q, want %q", e.GetKey(), s.key)
	}
	if v, err := strconv.Atoi(e.GetValue()); err != nil || v < 0 || v >= s.keys {
		return fmt.Errorf("entry value %q outside 0..%d", e.GetValue(), s.keys-1)
	}
	return nil
}

func (s *rlsServer) arrivals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

func (s *rlsServer) peerCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}

// startGRPC serves a rlsServer expecting the defaults on 127.0.0.1 and
// returns it with its address.
func startGRPC(t *testing.T) (*rlsServer, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rlsServer{domain: DefaultDomain, key: DefaultDescriptorKey, keys: DefaultKeys, hits: DefaultCost, peers: map[string]bool{}}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return s, lis.Addr().String()
}

// allowBody is the union of the two /v1/allow request forms.
type allowBody struct {
	Key         string `json:"key"`
	Limit       *Limit `json:"limit"`
	Domain      string `json:"domain"`
	Descriptors []struct {
		Entries []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"entries"`
	} `json:"descriptors"`
	Cost int64 `json:"cost"`
}

// allowServer is a real /v1/allow: its first call fails with 500, then it
// alternates 200 (even calls) and 429 (odd calls). A body that is not what
// the run was configured to send gets a 400, which the report counts as an
// error.
type allowServer struct {
	limit *Limit // the explicit limit expected; nil: policy lookups
	cost  int64
	delay time.Duration // before answering, to provoke client timeouts

	calls    atomic.Int64
	newConns atomic.Int64
}

func (s *allowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/allow" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want POST /v1/allow with JSON, got "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
		return
	}
	var b allowBody
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		http.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.check(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
	}
	n := s.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case n == 1:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":"store unavailable"}`)
	case n%2 == 0:
		fmt.Fprint(w, `{"allowed":true,"remaining":1}`)
	default:
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"allowed":false,"remaining":0}`)
	}
}

func (s *allowServer) check(b *allowBody) error {
	if b.Cost != s.cost {
		return fmt.Errorf("cost %d, want %d", b.Cost, s.cost)
	}
	var value string
	if s.limit != nil {
		if b.Limit == nil || *b.Limit != *s.limit || b.Domain != "" || b.Descriptors != nil {
			return fmt.Errorf("want key and limit %v only, got %+v", s.limit, b)
		}
		var ok bool
		if value, ok = strings.CutPrefix(b.Key, DefaultDescriptorKey+":"); !ok {
			return fmt.Errorf("key %q lacks the prefix %q", b.Key, DefaultDescriptorKey+":")
		}
	} else {
		if b.Key != "" || b.Limit != nil || b.Domain != DefaultDomain ||
			len(b.Descriptors) != 1 || len(b.Descriptors[0].Entries) != 1 ||
			b.Descriptors[0].Entries[0].Key != DefaultDescriptorKey {
			return fmt.Errorf("want domain %q and one descriptor {%s: N}, got %+v", DefaultDomain, DefaultDescriptorKey, b)
		}
		value = b.Descriptors[0].Entries[0].Value
	}
	if v, err := strconv.Atoi(value); err != nil || v < 0 || v >= DefaultKeys {
		return fmt.Errorf("value %q outside 0..%d", value, DefaultKeys-1)
	}
	return nil
}

// startHTTP serves s on 127.0.0.1 and returns its host:port.
func startHTTP(t *testing.T, s *allowServer) string {
	t.Helper()
	if s.cost == 0 {
		s.cost = DefaultCost
	}
	srv := httptest.NewUnstartedServer(s)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}
