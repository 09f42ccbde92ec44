package engine

import (
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
)

// The role and the KV-transfer counters, from fixtures of each engine that
// says them, and from fixtures that say nothing.
func TestDisagg(t *testing.T) {
	tests := []struct {
		file       string
		role       llmdiagv1.Role
		roleSource string
		kv         sample.KVTransfer
		wantErrs   bool
	}{
		{
			// Summed over engine cores: 150 transfers, 3.5 s, 3 GB, 3 failed.
			file: "vllm-nixl-decode.prom",
			kv:   sample.KVTransfer{Count: f(150), Seconds: f(3.5), Bytes: f(3e9), Failures: f(3)},
		},
		{
			// TP ranks read once; milliseconds to seconds; no volume.
			file: "sglang-pd-prefill.prom", role: llmdiagv1.Role_ROLE_PREFILL, roleSource: `engine_type="prefill"`,
			kv: sample.KVTransfer{Count: f(40), Seconds: f(0.8), Failures: f(1)},
		},
		{
			// A gauge where a histogram is read: nothing, and no error.
			file: "sglang-pd-decode-old.prom", role: llmdiagv1.Role_ROLE_DECODE, roleSource: `engine_type="decode"`,
		},
		{
			// The decode side's series are the prefill side's to fill: unread.
			file: "sglang-pd-decode.prom", role: llmdiagv1.Role_ROLE_DECODE, roleSource: `engine_type="decode"`,
		},
		{file: "dynamo-vllm-prefill-worker.prom", role: llmdiagv1.Role_ROLE_PREFILL, roleSource: `dynamo_component="prefill"`},
		// Aggregated deployments: no role, no transfers.
		{file: "sglang-dp2-tp2.prom"},
		{file: "vllm-v1-dynamo-metrics_examples.prom"},
		{file: "vllm-dp2.prom"},
		{file: "dynamo-frontend.prom"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s := Extract(llmdiagv1.Engine_ENGINE_UNSPECIFIED, parseFile(t, tc.file), time.Unix(0, 0))
			if s.Role != tc.role || s.RoleSource != tc.roleSource {
				t.Errorf("role %v from %q, want %v from %q", s.Role, s.RoleSource, tc.role, tc.roleSource)
			}
			got, want := s.KVTransfer, tc.kv
			fig := testkit.Figures(t, 1e-12)
			fig("count", got.Count, want.Count)
			fig("seconds", got.Seconds, want.Seconds)
			fig("bytes", got.Bytes, want.Bytes)
			fig("failures", got.Failures, want.Failures)
			if len(s.Errors) > 0 {
				t.Errorf("errors: %q", s.Errors)
			}
		})
	}
}

// Families that disagree on the role say nothing.
func TestDetectRoleConflict(t *testing.T) {
	fams := parseString(t, "# TYPE sglang:num_queue_reqs gauge\n"+
		`sglang:num_queue_reqs{engine_type="prefill",tp_rank="0"} 1`+"\n"+
		`sglang:num_queue_reqs{engine_type="decode",tp_rank="0",dp_rank="1"} 1`+"\n")
	if r, src := DetectRole(fams); r != llmdiagv1.Role_ROLE_UNSPECIFIED || src != "" {
		t.Fatalf("role %v from %q, want unspecified", r, src)
	}
	// Dynamo's "backend" is a decode worker or an aggregated one: unsaid.
	fams = parseString(t, "# TYPE dynamo_component_requests_total counter\n"+
		`dynamo_component_requests_total{dynamo_component="backend"} 1`+"\n")
	if r, _ := DetectRole(fams); r != llmdiagv1.Role_ROLE_UNSPECIFIED {
		t.Fatalf("backend read as %v", r)
	}
}

func TestKVTransferTable(t *testing.T) {
	for _, m := range kvTransferTable {
		main, ok := Lookup(m.Engine)
		if !ok {
			t.Fatalf("no main mapping for %v", m.Engine)
		}
		for c, srcs := range m.Concepts {
			if c < numConcepts || c >= numDisaggConcepts {
				t.Errorf("%v: concept %d is not a disaggregation concept", m.Engine, c)
			}
			for _, src := range srcs {
				if !hasAnyPrefix(src.Family, main.Prefixes()) {
					t.Errorf("%v %v: family %q lacks the engine's prefix", m.Engine, c, src.Family)
				}
			}
		}
	}
	if KVTransfers.String() != "kv_transfers" || KVTransferFailures.String() != "kv_transfer_failures" {
		t.Errorf("names %q, %q", KVTransfers, KVTransferFailures)
	}
}
