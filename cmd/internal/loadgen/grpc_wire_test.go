package loadgen

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The hand-written request reads, with protobuf-go, as the request it
// stands for.
func TestRLSRequestIsARateLimitRequest(t *testing.T) {
	for _, tc := range []rlsRequest{
		{domain: "bench", key: "user", value: []byte("42")},
		{domain: "d", key: "k", value: []byte{}, hits: 7},
		{domain: "long", key: string(make([]byte, 300)), value: make([]byte, 200), hits: 1 << 31},
	} {
		data, err := wireCodec{}.Marshal(&tc)
		if err != nil {
			t.Fatal(err)
		}
		var got rlsv3.RateLimitRequest
		if err := proto.Unmarshal(data.Materialize(), &got); err != nil {
			t.Fatalf("%+v: protobuf-go cannot read it: %v", tc, err)
		}
		d := got.GetDescriptors()
		if got.GetDomain() != tc.domain || got.GetHitsAddend() != tc.hits || len(d) != 1 || len(d[0].GetEntries()) != 1 ||
			d[0].GetEntries()[0].GetKey() != tc.key || d[0].GetEntries()[0].GetValue() != string(tc.value) {
			t.Errorf("%+v read as %v", tc, &got)
		}
	}
}

// The answer's overall code is read whatever else the response carries; a
// response that is not protobuf is an error wrapping errRLSResponse.
func TestRLSAnswerReadsTheOverallCode(t *testing.T) {
	full, err := proto.Marshal(&rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			Code: rlsv3.RateLimitResponse_OK, LimitRemaining: 3, DurationUntilReset: durationpb.New(7e9),
			CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
		}},
		ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "RateLimit", Value: `"l";r=3;t=7`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want uint64
		bad  bool
	}{
		{"full response", full, uint64(rlsv3.RateLimitResponse_OVER_LIMIT), false},
		{"empty: OK's zero value", nil, 0, false},
		{"truncated", full[:len(full)-3], 0, true},
		{"not protobuf", []byte{0xff, 0xff}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := rlsAnswer{code: 99}
			err := wireCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.in)}, &a)
			if errors.Is(err, errRLSResponse) != tc.bad || (!tc.bad && a.code != tc.want) {
				t.Errorf("code %d, error %v; want %d, malformed %v", a.code, err, tc.want, tc.bad)
			}
		})
	}
}
