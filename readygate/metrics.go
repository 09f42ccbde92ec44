package readygate

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// gateMetrics are the gate's metrics (llmdiag_readiness_gate_*).
type gateMetrics struct {
	writes    *prometheus.CounterVec
	deferred  prometheus.Counter
	spared    prometheus.Counter
	sparedNow prometheus.Gauge
	pods      prometheus.Gauge
	refused   prometheus.Gauge
	queue     prometheus.Gauge
	leader    prometheus.Gauge
	// leaseErrors counts the Lease's refused calls by op.
	leaseErrors *prometheus.CounterVec
}

// Write results, the label of llmdiag_readiness_gate_writes_total.
const (
	WriteOK    = "ok"
	WriteError = "error"
	WriteGone  = "gone"
)

func newMetrics(reg prometheus.Registerer) (*gateMetrics, error) {
	m := &gateMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_readiness_gate_writes_total",
			Help: "Writes of the readiness gate condition (pods/status), by result: ok, error, gone (the pod went away or was replaced)."}, []string{"result"}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmdiag_readiness_gate_deferred_writes_total",
			Help: "Writes of the readiness gate condition the rate limit (--readiness-gate-qps) deferred; each is written in its turn."}),
		spared: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmdiag_readiness_gate_spared_total",
			Help: "Pods set Spared: not routable, but their gate condition set True because --max-unready-fraction of their pool or model was already unready."}),
		sparedNow: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmdiag_readiness_gate_spared_pods",
			Help: "Gated pods not routable but kept ready by --max-unready-fraction, at the last plan."}),
		pods: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmdiag_readiness_gate_pods",
			Help: "Pods that declare the readiness gate and are kept by it."}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmdiag_readiness_gate_pods_refused",
			Help: "Pods that declare the readiness gate beyond the bound on pods kept, left alone."}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmdiag_readiness_gate_pending_writes",
			Help: "Gate conditions waiting to be written (at most one per pod)."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmdiag_readiness_gate_leader",
			Help: "1 while this replica holds the readiness gate's Lease (the only one that writes), else 0."}),
		leaseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_readiness_gate_lease_errors_total",
			Help: "Calls on the readiness gate's Lease the API server refused, by op: get, create, update (a conflict with another replica is not counted)."}, []string{"op"}),
	}
	for _, op := range []string{"get", "create", "update"} {
		m.leaseErrors.WithLabelValues(op)
	}
	for _, r := range []string{WriteOK, WriteError, WriteGone} {
		m.writes.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.writes, m.deferred, m.spared, m.sparedNow, m.pods, m.refused, m.queue, m.leader, m.leaseErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("readiness gate metrics: %w", err)
		}
	}
	return m, nil
}
