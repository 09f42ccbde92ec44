package lease

import "github.com/prometheus/client_golang/prometheus"

// The names of the lease's metrics (the dashboard package reads them).
const (
	MetricIsLeader     = "llmdiag_lease_is_leader"          // gauge, 1 on the holder
	MetricEpoch        = "llmdiag_lease_epoch"              // gauge
	MetricAcquisitions = "llmdiag_lease_acquisitions_total" // counter
	MetricLosses       = "llmdiag_lease_losses_total"       // counter by reason
	MetricRedisErrors  = "llmdiag_lease_redis_errors_total" // counter
)

type leaseMetrics struct {
	isLeader     prometheus.Gauge
	epoch        prometheus.Gauge
	acquisitions prometheus.Counter
	losses       *prometheus.CounterVec
	errors       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*leaseMetrics, error) {
	m := &leaseMetrics{
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricIsLeader,
			Help: "1 while this replica holds the ingest lease and refreshes, else 0.",
		}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricEpoch,
			Help: "Fencing epoch of the ingest lease's holder as this replica last saw it.",
		}),
		acquisitions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricAcquisitions,
			Help: "Times this replica acquired the ingest lease.",
		}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLosses,
			Help: "Times this replica lost the ingest lease: taken (another term holds it) or expired (not renewed in time).",
		}, []string{"reason"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricRedisErrors,
			Help: "Acquire and renew calls to Redis that failed.",
		}),
	}
	for _, r := range []string{"taken", "expired"} {
		m.losses.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.isLeader, m.epoch, m.acquisitions, m.losses, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
