package readmask_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/readmask"
)

func metrics() *llmdiagv1.NodeMetrics {
	return &llmdiagv1.NodeMetrics{
		Node:       "a-0",
		Model:      "m",
		Window:     "5m",
		Staleness:  durationpb.New(3),
		Up:         true,
		Queue:      proto.Float64(2),
		KvPressure: proto.Float64(0.5),
		Ttft: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: 0.1}},
			Count:       10,
			Sum:         1,
		},
		Gpu:    &llmdiagv1.GPUMetrics{Gpus: 8, Utilization: proto.Float64(0.9), XidErrors: []*llmdiagv1.GPUXid{{Gpu: "0", Xid: 79}}},
		Errors: []string{"x"},
	}
}

func TestPrune(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		want  *llmdiagv1.NodeMetrics
		key   string
	}{
		{"no mask", nil, metrics(), ""},
		{"empty mask", []string{}, metrics(), ""},
		{"top-level fields", []string{"queue", "kv_pressure", "node"},
			&llmdiagv1.NodeMetrics{Node: "a-0", Queue: proto.Float64(2), KvPressure: proto.Float64(0.5)}, "kv_pressure,node,queue"},
		{"nested path", []string{"ttft.count", "gpu.utilization"},
			&llmdiagv1.NodeMetrics{Ttft: &llmdiagv1.Distribution{Count: 10}, Gpu: &llmdiagv1.GPUMetrics{Utilization: proto.Float64(0.9)}}, "gpu.utilization,ttft.count"},
		{"repeated field ends a path", []string{"gpu.xid_errors", "errors"},
			&llmdiagv1.NodeMetrics{Gpu: &llmdiagv1.GPUMetrics{XidErrors: []*llmdiagv1.GPUXid{{Gpu: "0", Xid: 79}}}, Errors: []string{"x"}}, "errors,gpu.xid_errors"},
		{"a field and a path under it: the whole field", []string{"ttft.count", "ttft", "up"},
			&llmdiagv1.NodeMetrics{Up: true, Ttft: metrics().GetTtft()}, "ttft,up"},
		{"duplicates", []string{"up", "up"}, &llmdiagv1.NodeMetrics{Up: true}, "up"},
		{"a field that is not set", []string{"running"}, &llmdiagv1.NodeMetrics{}, "running"},
		{"nested under an unset message", []string{"queue_time.count"}, &llmdiagv1.NodeMetrics{}, "queue_time.count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := readmask.Parse(&llmdiagv1.NodeMetrics{}, tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			if m.Key() != tc.key {
				t.Errorf("key %q, want %q", m.Key(), tc.key)
			}
			got := metrics()
			m.Prune(got)
			if !proto.Equal(got, tc.want) {
				t.Errorf("pruned to\n%v\nwant\n%v", prototext.Format(got), prototext.Format(tc.want))
			}
			if len(tc.paths) == 0 {
				// No mask and an empty one: the very same bytes.
				a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(got)
				b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(metrics())
				if string(a) != string(b) || !m.All() {
					t.Error("an empty mask changed the message")
				}
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		bad   string
	}{
		{"unknown field", []string{"queue", "nope"}, "nope"},
		{"unknown nested field", []string{"ttft.nope"}, "ttft.nope"},
		{"through a scalar", []string{"queue.value"}, "queue.value"},
		{"through a repeated field", []string{"ttft.percentiles.value"}, "ttft.percentiles.value"},
		{"JSON name", []string{"kvPressure"}, "kvPressure"},
		{"empty path", []string{""}, ""},
		{"trailing dot", []string{"ttft."}, "ttft."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readmask.Parse(&llmdiagv1.NodeMetrics{}, tc.paths)
			var pe *readmask.PathError
			if !errors.As(err, &pe) || pe.Path != tc.bad || pe.Message != "llmdiag.v1.NodeMetrics" {
				t.Fatalf("Parse(%q) = %v, want a PathError for %q", tc.paths, err, tc.bad)
			}
		})
	}
}

func TestHas(t *testing.T) {
	m, err := readmask.Parse(&llmdiagv1.Diagnosis{}, []string{"status", "findings", "observed_at.seconds"})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"status": true, "findings": true, "findings.status": true,
		"observed_at": true, "observed_at.seconds": true, "observed_at.nanos": false,
		"staleness": false, "routable": false,
	} {
		if got := m.Has(path); got != want {
			t.Errorf("Has(%q) = %v, want %v", path, got, want)
		}
	}
	if !(readmask.Mask{}).Has("anything") {
		t.Error("the zero Mask does not keep every field")
	}
}
