package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name none.
const DefaultServiceName = "llmdiag"

// DefaultTimeout bounds one export when OTEL_EXPORTER_OTLP_TIMEOUT is not set
// (the specification's default).
const DefaultTimeout = 10 * time.Second

// Config is what FromEnv read: where spans go, and how they are sampled.
type Config struct {
	// Off says why tracing is off ("" when on): no endpoint set, the SDK
	// disabled, or the exporter "none".
	Off string
	// Endpoint is the traces endpoint: for http/protobuf the whole URL
	// spans are POSTed to (…/v1/traces), for grpc the collector's URL.
	// It may carry credentials: log it through redact.URL.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// Headers are sent with every export (they often carry an API key:
	// never logged).
	Headers map[string]string
	// Timeout bounds one export.
	Timeout time.Duration
	// Resource attributes, service.name among them.
	Resource []attribute.KeyValue
	// ServiceName is the resource's service.name.
	ServiceName string
	// Sampler decides which traces are recorded; SamplerName is its
	// OTEL_TRACES_SAMPLER name (with the argument, for the log).
	Sampler     sdktrace.Sampler
	SamplerName string
}

// FromEnv reads the standard variables through getenv (os.Getenv in serve;
// "" is unset):
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as it is, or else
//     OTEL_EXPORTER_OTLP_ENDPOINT, to which http/protobuf adds /v1/traces;
//     neither set: off. Either must be an http:// or https:// URL.
//   - OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL: grpc or http/protobuf (default).
//   - OTEL_EXPORTER_OTLP_[TRACES_]HEADERS: k=v,… (values percent-decoded).
//   - OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT: milliseconds (default 10000).
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (k=v,…).
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG: always_on,
//     always_off, traceidratio, parentbased_always_on (default),
//     parentbased_always_off, parentbased_traceidratio.
//
// A value it cannot use is an error naming the variable; values that may
// carry secrets (endpoint, headers) are not quoted.
func FromEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	// The signal's own variable wins over the general one.
	either := func(signal, general string) (name, v string) {
		if v := get(signal); v != "" {
			return signal, v
		}
		return general, get(general)
	}
	var c Config
	if v := get("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if off {
			c.Off = "OTEL_SDK_DISABLED=true"
			return c, nil
		}
	}
	switch v := get("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		c.Off = "OTEL_TRACES_EXPORTER=none"
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", v)
	}
	name, proto := either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch proto {
	case "":
		c.Protocol = ProtocolHTTP
	case ProtocolGRPC, ProtocolHTTP:
		c.Protocol = proto
	default:
		return c, fmt.Errorf("%s=%q: want grpc or http/protobuf", name, proto)
	}
	if v := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		if err := checkEndpoint(v); err != nil {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %w", err)
		}
		c.Endpoint = v
	} else if v := get("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		if err := checkEndpoint(v); err != nil {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
		}
		c.Endpoint = v
		if c.Protocol == ProtocolHTTP {
			c.Endpoint = strings.TrimRight(v, "/") + "/v1/traces"
		}
	} else {
		c.Off = "no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		return c, nil
	}
	name, hv := either("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
	h, err := keyValues(hv)
	if err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	if len(h) > 0 {
		c.Headers = make(map[string]string, len(h))
		for _, kv := range h {
			c.Headers[kv[0]] = kv[1]
		}
	}
	c.Timeout = DefaultTimeout
	if name, v := either("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive number of milliseconds", name, v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	ra, err := keyValues(get("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return c, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	c.ServiceName = DefaultServiceName
	for _, kv := range ra {
		if kv[0] == "service.name" {
			c.ServiceName = kv[1]
		}
	}
	if v := get("OTEL_SERVICE_NAME"); v != "" {
		c.ServiceName = v
	}
	c.Resource = append(c.Resource, attribute.String("service.name", c.ServiceName))
	for _, kv := range ra {
		if kv[0] != "service.name" {
			c.Resource = append(c.Resource, attribute.String(kv[0], kv[1]))
		}
	}
	c.Sampler, c.SamplerName, err = sampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	return c, err
}

// checkEndpoint refuses an endpoint that is no http(s) URL, without quoting
// it (it may hold credentials).
func checkEndpoint(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return errors.New("not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want http://host:port or https://host:port")
	}
	return nil
}

// maxKeyValues bounds the pairs of one k=v,… variable.
const maxKeyValues = 64

// keyValues parses k=v,k=v (W3C baggage-like, values percent-decoded), in
// order. Errors name the pair by position: a value may be a secret.
func keyValues(v string) ([][2]string, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxKeyValues {
		return nil, fmt.Errorf("%d pairs, more than %d", len(parts), maxKeyValues)
	}
	out := make([][2]string, 0, len(parts))
	for i, p := range parts {
		k, val, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("pair %d: want key=value", i+1)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("pair %d (%s): bad percent-encoding", i+1, k)
		}
		out = append(out, [2]string{k, dv})
	}
	return out, nil
}

// sampler is OTEL_TRACES_SAMPLER's sampler, with arg its ratio.
func sampler(name, arg string) (sdktrace.Sampler, string, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	ratioName := func(n string) string { return n + ":" + strconv.FormatFloat(ratio, 'g', -1, 64) }
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), ratioName(name), nil
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), "parentbased_always_on", nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), ratioName(name), nil
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}
