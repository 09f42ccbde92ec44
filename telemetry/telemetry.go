package telemetry

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/refresh"
)

// The names of llmdiag's own metrics (the dashboard package reads them).
const (
	MetricRPCRequests     = "llmdiag_rpc_requests_total"       // counter by procedure, code
	MetricRPCDuration     = "llmdiag_rpc_duration_seconds"     // histogram by procedure
	MetricRefreshDuration = "llmdiag_refresh_duration_seconds" // histogram
	MetricRefreshErrors   = "llmdiag_refresh_errors_total"     // counter
	MetricNodes           = "llmdiag_nodes"                    // gauge by status
	MetricNodesKept       = "llmdiag_nodes_kept"               // gauge
	MetricNodesRefused    = "llmdiag_nodes_refused_total"      // counter
	MetricNodesInvalidID  = "llmdiag_nodes_invalid_id_total"   // counter
	MetricNodesRemoved    = "llmdiag_nodes_removed_total"      // counter
)

// Labels of llmdiag's own metrics.
const (
	LabelProcedure = "procedure" // the RPC's Connect procedure, /pkg.Service/Method
	LabelCode      = "code"      // the Connect code, CodeOK for success
	LabelStatus    = "status"    // a node status's proto enum name
	CodeOK         = "ok"
)

// Metrics are llmdiag's own metrics.
type Metrics struct {
	rpcs           *prometheus.CounterVec
	rpcLatency     *prometheus.HistogramVec
	refreshSeconds prometheus.Histogram
	refreshErrors  prometheus.Counter
	nodes          *prometheus.GaugeVec
	nodesKept      prometheus.Gauge
	nodesRefused   prometheus.Counter
	nodesInvalid   prometheus.Counter
	nodesRemoved   prometheus.Counter
	now            func() time.Time
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer, now func() time.Time) (*Metrics, error) {
	m := &Metrics{
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRPCRequests,
			Help: "RPCs handled, by procedure and Connect code (ok for success).",
		}, []string{LabelProcedure, LabelCode}),
		rpcLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRPCDuration,
			Help:    "Time to handle an RPC (for streams: the stream's lifetime), by procedure.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 60, 600},
		}, []string{LabelProcedure}),
		refreshSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricRefreshDuration,
			Help:    "Time one refresh of the whole fleet took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}),
		refreshErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricRefreshErrors,
			Help: "Refreshes that failed as a whole (per-node scrape errors show in verdicts instead).",
		}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricNodes,
			Help: "Nodes by status after the last refresh.",
		}, []string{LabelStatus}),
		nodesKept: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricNodesKept,
			Help: "Nodes the refresh loop keeps after the last refresh (at most --max-nodes).",
		}),
		nodesRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricNodesRefused,
			Help: "New nodes refused because --max-nodes nodes were kept, counted once per refresh that refused them.",
		}),
		nodesInvalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricNodesInvalidID,
			Help: "Observations skipped because their node id is not a valid id, counted once per refresh.",
		}),
		nodesRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricNodesRemoved,
			Help: "Nodes forgotten because their source had not presented them for --retention.",
		}),
		now: now,
	}
	for _, c := range []prometheus.Collector{m.rpcs, m.rpcLatency, m.refreshSeconds, m.refreshErrors, m.nodes,
		m.nodesKept, m.nodesRefused, m.nodesInvalid, m.nodesRemoved} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveRefresh records one refresh.
func (m *Metrics) ObserveRefresh(d time.Duration, err error) {
	m.refreshSeconds.Observe(d.Seconds())
	if err != nil {
		m.refreshErrors.Inc()
	}
}

// SetNodeStatuses records how many nodes have each status.
func (m *Metrics) SetNodeStatuses(counts map[llmdiagv1.Status]int) {
	for v, name := range llmdiagv1.Status_name {
		if v == 0 {
			continue
		}
		m.nodes.WithLabelValues(name).Set(float64(counts[llmdiagv1.Status(v)]))
	}
}

// ObserveNodeSet records what a refresh did to the node set. Nodes are
// counted, never named: no metric has a node label, so nodes joining and
// leaving never grow the registry.
func (m *Metrics) ObserveNodeSet(ns refresh.NodeSet) {
	m.nodesKept.Set(float64(ns.Kept))
	m.nodesRefused.Add(float64(ns.Refused))
	m.nodesInvalid.Add(float64(ns.Invalid))
	m.nodesRemoved.Add(float64(len(ns.Removed)))
}

// Interceptor counts and times every RPC.
func (m *Metrics) Interceptor() connect.Interceptor { return interceptor{m} }

type interceptor struct{ m *Metrics }

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := i.m.now()
		resp, err := next(ctx, req)
		i.m.observe(req.Spec().Procedure, start, err)
		return resp, err
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := i.m.now()
		err := next(ctx, conn)
		i.m.observe(conn.Spec().Procedure, start, err)
		return err
	}
}

func (m *Metrics) observe(procedure string, start time.Time, err error) {
	code := CodeOK
	if err != nil {
		code = connect.CodeOf(err).String()
		if errors.Is(err, context.Canceled) {
			code = connect.CodeCanceled.String()
		}
	}
	m.rpcs.WithLabelValues(procedure, code).Inc()
	m.rpcLatency.WithLabelValues(procedure).Observe(m.now().Sub(start).Seconds())
}
