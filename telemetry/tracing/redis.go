package tracing

import (
	"context"
	"strings"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// WrapClient returns a redisstore.Config.WrapClient that makes each Redis
// command sent with Do or DoMulti (all a decision sends) a client span of
// tp (nil: OpenTelemetry's global provider), named after the command
// (EVALSHA, EVAL, ...), with the semantic conventions' db.system.name and
// db.operation.name. As the store's calls carry their caller's context,
// these spans are children of the decision's span. A command whose
// context has no recording span is sent as is, at the cost of one check.
//
// (redis/rueidis/rueidisotel does this too, but no release of it that the
// module proxy serves builds against the rueidis this module uses.)
func WrapClient(tp trace.TracerProvider) func(rueidis.Client) rueidis.Client {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	tracer := tp.Tracer(instrumentation)
	return func(c rueidis.Client) rueidis.Client { return &tracedClient{Client: c, tracer: tracer} }
}

// tracedClient is a rueidis.Client whose Do and DoMulti are traced; its
// other methods are the wrapped client's.
type tracedClient struct {
	rueidis.Client
	tracer trace.Tracer
}

func (c *tracedClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return c.Client.Do(ctx, cmd)
	}
	ctx, span := c.start(ctx, operation(cmd), 1)
	res := c.Client.Do(ctx, cmd)
	end(span, res.Error())
	return res
}

func (c *tracedClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if len(cmds) == 0 || !trace.SpanFromContext(ctx).IsRecording() {
		return c.Client.DoMulti(ctx, cmds...)
	}
	ctx, span := c.start(ctx, operation(cmds[0]), len(cmds))
	res := c.Client.DoMulti(ctx, cmds...)
	var err error
	for _, r := range res {
		if err = r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			break
		}
		err = nil
	}
	end(span, err)
	return res
}

func (c *tracedClient) start(ctx context.Context, op string, n int) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", op),
	}
	if n > 1 {
		attrs = append(attrs, attribute.Int("db.operation.batch.size", n))
	}
	return c.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// operation is a command's name: its first word, upper case.
func operation(cmd rueidis.Completed) string {
	if words := cmd.Commands(); len(words) > 0 {
		return strings.ToUpper(words[0])
	}
	return "redis"
}

func end(span trace.Span, err error) {
	if err != nil && !rueidis.IsRedisNil(err) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
