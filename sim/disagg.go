package sim

import (
	"errors"

	"strconv"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Prefill/decode disaggregation. A node with a Role is one worker of a
// deployment whose prefill and decode workers are simulated apart, each
// with its own traffic: the prefill worker computes whole prompts and
// answers one token (the proxy's max_tokens=1); the decode worker gets
// requests whose prompt KV a prefill worker has computed, all but the
// last token (recomputed locally, as vLLM's NIXL connector does), which
// it receives over KVLink before its first token. The transfer is
// modelled as time before the request reaches the decode worker's queue,
// counted in its TTFT and E2E and not in its queue time: the batch slot
// and KV blocks a real decode worker holds while the transfer runs are
// not. The prefill worker's own queue and prefill are not added to the
// decode worker's TTFT: each worker's metrics are its own, as the engines
// report them.

// KVLink is the path KV caches take from prefill to decode workers.
type KVLink struct {
	// BytesPerToken is the KV cache of one token over all layers (MLA:
	// layers × (latent + rope dims) × 2 bytes).
	BytesPerToken float64
	// BytesPerSec is the path's throughput for one transfer.
	BytesPerSec float64
}

// bytes and seconds are one transfer of a prompt's KV cache.
func (l KVLink) bytes(prompt int) float64   { return float64(prompt) * l.BytesPerToken }
func (l KVLink) seconds(prompt int) float64 { return l.bytes(prompt) / l.BytesPerSec }

// role is the node's role as the API names it.
func (n Node) role() llmdiagv1.Role {
	r, _ := fleet.ParseRole(n.Role)
	return r
}

// validateRole checks Role and, for a disaggregated node, its KVLink.
func (n Node) validateRole() error {
	r, err := fleet.ParseRole(n.Role)
	if err != nil {
		return err
	}
	if (r == llmdiagv1.Role_ROLE_PREFILL || r == llmdiagv1.Role_ROLE_DECODE) && !(n.KVTransfer.BytesPerToken > 0 && n.KVTransfer.BytesPerSec > 0) {
		return errors.New("kv transfer: a prefill or decode worker needs positive bytes per token and bytes per second")
	}
	return nil
}

// remoteKV makes r, new on a decode worker at t, a request whose prompt KV
// arrives from a prefill worker: all of the prompt but its last token is
// computed, and it arrived (at the worker, which starts its TTFT clock) the
// transfer's time before t.
func (n *node) remoteKV(r *request, t float64) {
	if n.cfg.role() != llmdiagv1.Role_ROLE_DECODE {
		return
	}
	r.cached = max(r.cached, r.prompt-1)
	r.computed = r.cached
	r.arrival = t - n.cfg.KVTransfer.seconds(r.prompt)
}

// kvObserver is an engine's KV-transfer metrics.
type kvObserver interface {
	// transfer records one transfer of the KV cache of prompt tokens.
	transfer(core int, seconds, bytes float64)
}

// disaggRecorder adds the KV transfers to a recorder, on the side whose
// engine observes them (observer): vLLM's NIXL connector on the decode
// worker, which pulls the KV cache (counted when the request is first
// scheduled); SGLang on the prefill worker, which sends it (counted when
// the request finishes there). On a decode worker it also takes the
// transfer out of the queue time (see remoteKV).
type disaggRecorder struct {
	recorder
	kv       kvObserver
	role     llmdiagv1.Role
	observer llmdiagv1.Role
	link     KVLink
}

// withDisagg wraps rec for a node with a role; rec itself otherwise.
func withDisagg(rec recorder, ms *metricSet, n Node) recorder {
	role := n.role()
	if role != llmdiagv1.Role_ROLE_PREFILL && role != llmdiagv1.Role_ROLE_DECODE {
		return rec
	}
	d := disaggRecorder{recorder: rec, role: role, link: n.KVTransfer}
	d.kv, d.observer = newKVObserver(ms, n)
	return d
}

func (d disaggRecorder) scheduled(core int, queue float64, queried, hit int) {
	if d.role == llmdiagv1.Role_ROLE_DECODE {
		queue -= d.link.seconds(queried)
		if d.kv != nil && d.observer == d.role {
			d.kv.transfer(core, d.link.seconds(queried), d.link.bytes(queried))
		}
	}
	d.recorder.scheduled(core, max(queue, 0), queried, hit)
}

func (d disaggRecorder) finished(core int, r *request, now float64) {
	d.recorder.finished(core, r, now)
	if d.role == llmdiagv1.Role_ROLE_PREFILL && d.kv != nil && d.observer == d.role && succeeded(r) {
		d.kv.transfer(core, d.link.seconds(r.prompt), d.link.bytes(r.prompt))
	}
}

// newKVObserver creates the KV-transfer families of n's engine in ms, and
// says which side observes transfers; nil for engines that export none
// (docs/engine-metrics.md, "Roles and KV transfer").
func newKVObserver(ms *metricSet, n Node) (kvObserver, llmdiagv1.Role) {
	switch n.Engine {
	case VLLM, VLLMOTel:
		return newNIXLMetrics(ms, n), llmdiagv1.Role_ROLE_DECODE
	case SGLang:
		return newSGLangKVMetrics(ms, n), llmdiagv1.Role_ROLE_PREFILL
	}
	return nil, llmdiagv1.Role_ROLE_UNSPECIFIED
}

// nixlXferBuckets and nixlBytesBuckets are NixlPromMetrics' bounds
// (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py).
var (
	nixlXferBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 5}
	nixlBytesBuckets = func() []float64 {
		var b []float64
		for i := 1; i < 25; i += 2 {
			b = append(b, float64(uint64(1)<<(10+i)))
		}
		return b
	}()
)

// nixlMetrics is vLLM's NIXL connector: per engine core, created at start
// on both sides (a prefill worker's stay at 0 in pull mode).
type nixlMetrics struct {
	xfer, bytes []*series
}

func newNIXLMetrics(m *metricSet, n Node) *nixlMetrics {
	l := []string{"model_name", "engine"}
	xfer := m.histogram("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.", nixlXferBuckets, l...)
	bytes := m.histogram("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.", nixlBytesBuckets, l...)
	failed := m.counter("vllm:nixl_num_failed_transfers_total", "Number of failed NIXL KV Cache transfers.", l...)
	x := &nixlMetrics{}
	for i := range n.cores() {
		e := strconv.Itoa(i)
		x.xfer = append(x.xfer, xfer.with(n.Model, e))
		x.bytes = append(x.bytes, bytes.with(n.Model, e))
		failed.with(n.Model, e) // no transfer fails in the simulation
	}
	return x
}

func (x *nixlMetrics) transfer(c int, seconds, bytes float64) {
	x.xfer[c].observe(seconds)
	x.bytes[c].observe(bytes)
}

// sglangKVLatencyBuckets are the bounds of SGLang's transfer latency
// histogram, in milliseconds.
var sglangKVLatencyBuckets = []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000}

// sglangKVMetrics is SGLang's transfer latency, on the scheduler series
// (engine_type, ranks). Its failure counter appears with the first
// failure, which the simulation never has.
type sglangKVMetrics struct {
	latency []*series
}

func newSGLangKVMetrics(m *metricSet, n Node) *sglangKVMetrics {
	l, lvs := sglangSchedulerLabels(n, "model_name")
	h := m.histogram("sglang:kv_transfer_latency_ms", "Histogram of KV transfer latency in milliseconds.", sglangKVLatencyBuckets, l...)
	s := &sglangKVMetrics{}
	for _, lv := range lvs {
		s.latency = append(s.latency, h.with(lv...))
	}
	return s
}

func (s *sglangKVMetrics) transfer(c int, seconds, _ float64) { s.latency[c].observe(seconds * 1000) }

// sglangEngineType is the engine_type label of SGLang's scheduler series:
// the role under --disaggregation-mode, "unified" without it. The 2024
// scheme predates disaggregation.
func sglangEngineType(n Node) string {
	switch r := n.role(); {
	case n.Engine == SGLangLegacy:
	case r == llmdiagv1.Role_ROLE_PREFILL:
		return "prefill"
	case r == llmdiagv1.Role_ROLE_DECODE:
		return "decode"
	}
	return "unified"
}
