package grpclimit

import (
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

func TestObserverSeesEveryRulesDecision(t *testing.T) {
	rules := []Rule{
		{Name: "a", Limit: floodgate.PerSecond(1), Key: Constant("k")},
		{Name: "b", Limit: floodgate.PerSecond(5), Key: Constant("k")},
	}
	for _, tc := range []struct {
		name string
		wrap func(*floodgate.Memory) floodgate.Limiter
		// the second call's events: a batch reports both rules, a
		// sequence stops at the one that denied
		second []observe.Outcome
	}{
		{"batch", func(m *floodgate.Memory) floodgate.Limiter { return m }, []observe.Outcome{observe.Denied, observe.Allowed}},
		{"sequence", func(m *floodgate.Memory) floodgate.Limiter { return onlyAllowN{m} }, []observe.Outcome{observe.Denied}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, mem := manual()
			rec := &observetest.Recorder{}
			c, _ := serve(t, tc.wrap(mem), Options{Rules: rules, Name: "svc", Observer: rec})
			ctx := ctxT(t)
			if _, err := call(ctx, c); err != nil {
				t.Fatal(err)
			}
			_, err := call(ctx, c)
			wantCode(t, err, codes.ResourceExhausted)
			want := append([]observe.Outcome{observe.Allowed, observe.Allowed}, tc.second...)
			ev := rec.Events()
			if len(ev) != len(want) {
				t.Fatalf("%d events %+v, want %d", len(ev), ev, len(want))
			}
			for i, e := range ev {
				if e.Outcome != want[i] || e.Surface != observe.SurfaceGRPC || e.Policy != "svc" || e.Client != "127.0.0.1" {
					t.Errorf("event %d %+v: want outcome %v, surface grpclimit, policy svc, client 127.0.0.1", i, e, want[i])
				}
				if wantName := rules[i%2].Name; e.Limit != wantName || e.Key != wantName+":k" {
					t.Errorf("event %d: limit %q key %q", i, e.Limit, e.Key)
				}
			}
			if s := rec.Summaries(); len(s) != 2 || s[1].Outcome != observe.Denied {
				t.Fatalf("summaries %+v", s)
			}
		})
	}
}

func TestNoObserverNoReport(t *testing.T) {
	_, mem := manual()
	lim, err := newLimiter(mem, Options{Rules: []Rule{{Name: "a", Limit: floodgate.PerSecond(1), Key: Constant("k")}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if got, rep := lim.observe(ctx, nil); got != ctx || !reflect.ValueOf(rep).IsZero() {
		t.Fatal("without an Observer the decision's context changed or a report started")
	}
}
