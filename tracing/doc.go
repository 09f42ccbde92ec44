// Package tracing is llmdiag's OpenTelemetry tracing: a TracerProvider
// built from the standard OTEL_* environment (FromEnv, New), the Connect
// interceptor that gives every RPC a server span (Tracing.Interceptors),
// child spans for the work under a span (Child), and a go-redis hook that
// traces Redis commands by name only (RedisHook).
//
// With no OTLP endpoint in the environment, or with OTEL_SDK_DISABLED=true,
// tracing is off: the provider is a no-op one, no interceptor is installed,
// nothing runs in the background and Child returns at once.
//
// Only roots are made with the provider passed in: the RPC's server span
// (the interceptor) and a refresh cycle (refresh.Config.TracerProvider).
// Everything under them (store reads and writes, scrapes, Prometheus
// queries, Redis commands) is made by Child from the provider of the span
// its context carries, so that the packages doing that work take no tracing
// dependency of their own and do nothing when their caller is not traced.
// Work no traced caller started (a replica's sync, the fast lane, the
// lease) makes no spans.
//
// Spans carry ids (node, engine, query kind, Redis command name), never
// URLs with credentials, PromQL results, Redis keys or arguments.
package tracing
