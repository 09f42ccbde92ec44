package tracing

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// RedisHook traces the Redis commands made under a recording span (Child):
// one client span per command, named "redis " and the command's name, and
// one per pipeline with its size and the names of its first commands. No
// key, argument or reply is recorded, and an error is recorded by its kind
// only (a Redis error's code, a timeout, a network error): Redis quotes
// arguments in some of its errors.
func RedisHook() redis.Hook { return redisHook{} }

type redisHook struct{}

// maxPipelineNames bounds the command names a pipeline's span lists.
const maxPipelineNames = 8

var redisSystem = attribute.String("db.system.name", "redis")

func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmd)
		}
		ctx, span := Child(ctx, "redis "+cmd.Name(), trace.WithSpanKind(trace.SpanKindClient))
		span.SetAttributes(redisSystem, attribute.String("db.operation.name", cmd.Name()))
		err := next(ctx, cmd)
		endRedis(span, err)
		return err
	}
}

func (redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmds)
		}
		ctx, span := Child(ctx, "redis pipeline", trace.WithSpanKind(trace.SpanKindClient))
		var names []string
		for _, c := range cmds {
			if len(names) == maxPipelineNames {
				names = append(names, "…")
				break
			}
			names = append(names, c.Name())
		}
		span.SetAttributes(redisSystem, attribute.String("db.operation.name", "pipeline"),
			attribute.Int("db.operation.batch.size", len(cmds)), attribute.String("llmdiag.redis.commands", strings.Join(names, " ")))
		err := next(ctx, cmds)
		endRedis(span, err)
		return err
	}
}

// endRedis ends span, failed with err's kind; redis.Nil (no such key) is
// an answer, not a failure.
func endRedis(span trace.Span, err error) {
	if err != nil && !errors.Is(err, redis.Nil) {
		span.SetStatus(codes.Error, redisErrorKind(err))
	}
	span.End()
}

// redisErrorKind names err without its text: a Redis error by its code
// (ERR, WRONGTYPE, NOAUTH, …), a deadline or cancellation as such, a
// network error as one.
func redisErrorKind(err error) string {
	var re redis.Error
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &re):
		code, _, _ := strings.Cut(re.Error(), " ")
		return "redis error " + code
	case errors.As(err, &ne):
		if ne.Timeout() {
			return "network timeout"
		}
		return "network error"
	}
	return "error"
}
