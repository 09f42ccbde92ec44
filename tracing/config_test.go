package tracing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/tracing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// want: off reason (substring), or endpoint, protocol, sampler.
		off, endpoint, protocol, sampler, service string
		timeout                                   time.Duration
		headers                                   int
		err                                       string // substring of the error
		notInErr                                  string // a secret the error must not quote
	}{
		{name: "nothing set", env: nil, off: "no OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "only a service name", env: map[string]string{"OTEL_SERVICE_NAME": "x"}, off: "no OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "endpoint, http by default", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			endpoint: "http://collector:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on", service: "llmdiag", timeout: 10 * time.Second},
		{name: "endpoint with a trailing slash", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318/"},
			endpoint: "https://collector:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on", service: "llmdiag", timeout: 10 * time.Second},
		{name: "grpc takes the endpoint as it is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			endpoint: "http://collector:4317", protocol: "grpc", sampler: "parentbased_always_on", service: "llmdiag", timeout: 10 * time.Second},
		{name: "the traces endpoint wins and is used as it is", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/custom"},
			endpoint: "http://b:4318/custom", protocol: "http/protobuf", sampler: "parentbased_always_on", service: "llmdiag", timeout: 10 * time.Second},
		{name: "the traces protocol wins", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			endpoint: "http://a:4317", protocol: "grpc", sampler: "parentbased_always_on", service: "llmdiag", timeout: 10 * time.Second},
		{name: "disabled wins over an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"},
			off: "OTEL_SDK_DISABLED=true"},
		{name: "disabled=false is on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "false"},
			endpoint: "http://a:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on", service: "llmdiag", timeout: 10 * time.Second},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"},
			off: "OTEL_TRACES_EXPORTER=none"},
		{name: "service name, resource, sampler, timeout, headers", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SERVICE_NAME": "diag-eu",
			"OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored,deployment.environment=prod",
			"OTEL_TRACES_SAMPLER":      "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
			"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cr%20t,x-tenant=a"},
			endpoint: "http://a:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_traceidratio:0.25", service: "diag-eu", timeout: 2500 * time.Millisecond, headers: 2},
		{name: "service name from the resource", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource"},
			endpoint: "http://a:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on", service: "from-resource", timeout: 10 * time.Second},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL=\"http/json\": want grpc or http/protobuf"},
		{name: "endpoint without a scheme, not quoted", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "user:hunter2@a:4318"},
			err: "OTEL_EXPORTER_OTLP_ENDPOINT: ", notInErr: "hunter2"},
		{name: "bad header pair, value not quoted", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=hunter2,oops"},
			err: "OTEL_EXPORTER_OTLP_TRACES_HEADERS: pair 2: want key=value", notInErr: "hunter2"},
		{name: "bad sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "sometimes"},
			err: "OTEL_TRACES_SAMPLER=\"sometimes\""},
		{name: "ratio out of range", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
			err: "OTEL_TRACES_SAMPLER_ARG=\"2\": want a ratio from 0 to 1"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
			err: "OTEL_EXPORTER_OTLP_TIMEOUT=\"10s\": want a positive number of milliseconds"},
		{name: "bad disabled", env: map[string]string{"OTEL_SDK_DISABLED": "yes please"}, err: "OTEL_SDK_DISABLED"},
		{name: "unsupported exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER=\"zipkin\": want otlp or none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.FromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				if tc.notInErr != "" && strings.Contains(err.Error(), tc.notInErr) {
					t.Errorf("err %q quotes a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.off != "" {
				if !strings.Contains(c.Off, tc.off) {
					t.Errorf("off %q, want it saying %q", c.Off, tc.off)
				}
				return
			}
			if c.Off != "" {
				t.Fatalf("off: %s", c.Off)
			}
			if c.Endpoint != tc.endpoint || c.Protocol != tc.protocol || c.SamplerName != tc.sampler || c.ServiceName != tc.service || c.Timeout != tc.timeout || len(c.Headers) != tc.headers {
				t.Errorf("got endpoint %q protocol %q sampler %q service %q timeout %v headers %d,\nwant %q %q %q %q %v %d",
					c.Endpoint, c.Protocol, c.SamplerName, c.ServiceName, c.Timeout, len(c.Headers), tc.endpoint, tc.protocol, tc.sampler, tc.service, tc.timeout, tc.headers)
			}
			if tc.headers > 0 && c.Headers["api-key"] != "s3cr t" {
				t.Errorf("header api-key %q, want it percent-decoded", c.Headers["api-key"])
			}
		})
	}
}
