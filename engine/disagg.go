package engine

import (
	"fmt"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// The concepts of prefill/decode disaggregation. They are read with the
// engine's rank and replica labels, like the concepts of the main table,
// but from a table of their own (kvTransferTable, KVTransferMapping), which
// the Prometheus-API source queries beside the main one.
const (
	KVTransfers        Concept = iota + numConcepts // KV-cache transfers completed (counter)
	KVTransferSeconds                               // their summed duration, seconds (counter)
	KVTransferBytes                                 // bytes transferred (counter)
	KVTransferFailures                              // failed transfers (counter)
	numDisaggConcepts
)

var disaggConceptNames = [...]string{"kv_transfers", "kv_transfer_seconds", "kv_transfer_bytes", "kv_transfer_failures"}

// kvTransferTable is, per engine, where the KV-transfer counters are read.
//
// vLLM's NIXL connector (vllm/distributed/kv_transfer/kv_connector/v1,
// NixlPromMetrics) observes every transfer into vllm:nixl_xfer_time_seconds
// and vllm:nixl_bytes_transferred and counts failures in
// vllm:nixl_num_failed_transfers; series carry model_name and engine. The
// side that drives the transfer observes it (the decode worker in NIXL's
// default pull mode), so a prefill worker may read 0 transfers.
//
// SGLang (srt/metrics/collector.py) observes the prefill side's transfer
// latency into sglang:kv_transfer_latency_ms (a histogram in current
// releases, milliseconds) and counts sglang:num_transfer_failed_reqs on
// either side. Its sglang:kv_transfer_total_mb is not read: the size of
// its "MB" is not documented.
var kvTransferTable = []Mapping{
	{
		Engine:        llmdiagv1.Engine_ENGINE_VLLM,
		ReplicaLabels: []string{"engine"},
		Concepts: map[Concept][]Source{
			KVTransfers:        vllm("nixl_xfer_time_seconds", HistogramCount, Sum),
			KVTransferSeconds:  vllm("nixl_xfer_time_seconds", HistogramSum, Sum),
			KVTransferBytes:    vllm("nixl_bytes_transferred", HistogramSum, Sum),
			KVTransferFailures: vllm("nixl_num_failed_transfers_total", Counter, Sum),
		},
	},
	{
		Engine:        llmdiagv1.Engine_ENGINE_SGLANG,
		RankLabels:    []string{"tp_rank", "pp_rank", "moe_ep_rank", "pid"},
		ReplicaLabels: []string{"dp_rank", "engine_type"},
		Concepts: map[Concept][]Source{
			KVTransfers:        {{Family: "sglang:kv_transfer_latency_ms", Kind: HistogramCount}},
			KVTransferSeconds:  {{Family: "sglang:kv_transfer_latency_ms", Kind: HistogramSum, Scale: 1e-3}},
			KVTransferFailures: {{Family: "sglang:num_transfer_failed_reqs_total", Kind: Counter}},
		},
	},
}

// kvObservedOn is the role that observes the transfers, for engines that
// observe them on one side only: SGLang sets its transfer latency on the
// prefill worker, so a decode worker's series (detected by engine_type)
// are not read.
var kvObservedOn = map[llmdiagv1.Engine]llmdiagv1.Role{llmdiagv1.Engine_ENGINE_SGLANG: llmdiagv1.Role_ROLE_PREFILL}

// KVTransferMapping is where engine e's KV-transfer concepts are read:
// Concepts holds only those; false when e exports none.
func KVTransferMapping(e llmdiagv1.Engine) (*Mapping, bool) {
	for i := range kvTransferTable {
		if kvTransferTable[i].Engine == e {
			return &kvTransferTable[i], true
		}
	}
	return nil, false
}

// ReadsKVTransfers reports whether the KV-transfer counters of a node of
// engine e whose detected role (DetectRole) is role are read: not those of
// the side that does not observe the transfers (kvObservedOn), whose
// series stay at 0.
func ReadsKVTransfers(e llmdiagv1.Engine, role llmdiagv1.Role) bool {
	side, ok := kvObservedOn[e]
	return !ok || role == llmdiagv1.Role_ROLE_UNSPECIFIED || role == side
}

// KVTransferFamilies lists the families the KV-transfer concepts are read
// from, for every engine.
func KVTransferFamilies() []string {
	var out []string
	for _, m := range kvTransferTable {
		for _, srcs := range m.Concepts {
			for _, src := range srcs {
				out = append(out, src.Families()...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// roleLabels are the labels that say a node's role, with the families
// that carry them and the value of each role. SGLang labels its scheduler
// series engine_type="prefill" or "decode" when started with
// --disaggregation-mode ("unified" otherwise); a Dynamo worker's runtime
// series carry the component it serves, "prefill" for a prefill worker.
// Dynamo's decode worker is component "backend", as is a worker of an
// aggregated deployment, so "backend" says nothing; "decode" is read where
// a deployment names it so.
var roleLabels = []RoleLabel{
	{"sglang:", "engine_type", map[string]llmdiagv1.Role{"prefill": llmdiagv1.Role_ROLE_PREFILL, "decode": llmdiagv1.Role_ROLE_DECODE}},
	{"dynamo_component_", "dynamo_component", map[string]llmdiagv1.Role{"prefill": llmdiagv1.Role_ROLE_PREFILL, "decode": llmdiagv1.Role_ROLE_DECODE}},
}

// RoleLabel is a label that says a node's role on the families whose
// names start with Prefix: each value of Values says a role, other values
// nothing.
type RoleLabel struct {
	Prefix, Label string
	Values        map[string]llmdiagv1.Role
}

// RoleLabels are the labels DetectRole reads, in the order it reads them.
// The caller must not modify them.
func RoleLabels() []RoleLabel { return roleLabels }

// LabelValue is one value of a label seen on a node's series.
type LabelValue struct{ Label, Value string }

// RoleFrom tells a node's role from the values of the role labels its
// series carry (on families of each label's prefix; any order, repeats
// allowed), and names the label it read, as `engine_type="prefill"`. It
// returns ROLE_UNSPECIFIED when no value says a role, or when they
// disagree. DetectRole and the Prometheus-API source both decide here.
func RoleFrom(seen []LabelValue) (llmdiagv1.Role, string) {
	role, source := llmdiagv1.Role_ROLE_UNSPECIFIED, ""
	for _, rl := range roleLabels {
		for _, lv := range seen {
			if lv.Label != rl.Label {
				continue
			}
			r, ok := rl.Values[lv.Value]
			switch {
			case !ok:
			case role == llmdiagv1.Role_ROLE_UNSPECIFIED:
				role, source = r, fmt.Sprintf("%s=%q", rl.Label, lv.Value)
			case r != role:
				return llmdiagv1.Role_ROLE_UNSPECIFIED, ""
			}
		}
	}
	return role, source
}

// DetectRole tells a node's role from its families (see roleLabels and
// RoleFrom), and names the label it read, as `engine_type="prefill"`. It
// returns ROLE_UNSPECIFIED when no family says, or when they disagree.
func DetectRole(families map[string]*dto.MetricFamily) (llmdiagv1.Role, string) {
	var seen []LabelValue
	for _, rl := range roleLabels {
		for name, mf := range families {
			if !strings.HasPrefix(name, rl.Prefix) {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() != rl.Label {
						continue
					}
					if _, ok := rl.Values[l.GetValue()]; ok {
						seen = append(seen, LabelValue{rl.Label, l.GetValue()})
					}
				}
			}
		}
	}
	return RoleFrom(seen)
}

// disagg fills the role and the KV-transfer counters of s, recording the
// errors of unusable families with x's.
func (x *extractor) disagg(s *sample.Sample) {
	s.Role, s.RoleSource = DetectRole(x.families)
	for i := range kvTransferTable {
		m := &kvTransferTable[i]
		if m.Engine != x.m.Engine {
			continue
		}
		if !ReadsKVTransfers(m.Engine, s.Role) {
			// The other side's series stay at 0: not "no transfer".
			continue
		}
		y := &extractor{m: m, families: x.families}
		s.KVTransfer = sample.KVTransfer{
			Count:    y.typedValue(KVTransfers),
			Seconds:  y.typedValue(KVTransferSeconds),
			Bytes:    y.typedValue(KVTransferBytes),
			Failures: y.typedValue(KVTransferFailures),
		}
		x.errs = append(x.errs, y.errs...)
	}
}

// typedValue is value, except that a family of another type than the one
// read leaves c nil without an error: older SGLang exports
// kv_transfer_latency_ms as a gauge of the last transfer, which holds no
// count.
func (x *extractor) typedValue(c Concept) *float64 {
	for _, src := range x.m.Concepts[c] {
		if x.present(src) {
			if x.checkTypes(src) != nil {
				return nil
			}
			break
		}
	}
	return x.value(c)
}
