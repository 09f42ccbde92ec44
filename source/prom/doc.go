// Package prom reads the fleet from the Prometheus HTTP API: the
// production source of llmdiag.
//
// A refresh issues a fixed set of instant queries per engine of the mapping
// table (engine.Engines), each covering every node of that engine at once:
//
//   - identity: max by (node, dp, tp, model labels) (timestamp(gauges)): which
//     nodes exist, their model, their data- and tensor-parallel degree (the
//     distinct values of Mapping.DPLabel and TPLabel) and when each was last
//     scraped;
//   - vanished: the nodes that had the engine's queue gauge within
//     Config.Lookback but have no series now (target down or gone): they are
//     reported with Up false;
//   - per number concept, one value per node: gauges aggregated with
//     sum/avg/max by (node) as Source.Agg says (per rank, see below, for
//     engines with ranks), counters as
//     sum by (node) (rate(family[w])) (rate before sum, so an engine core that
//     restarts is not counted twice);
//   - per KV concept, one value per node and replica (Mapping.ReplicaLabels),
//     combined here as engine.Extract does: used / capacity where both exist,
//     else the usage gauge weighted by each replica's capacity, else its mean;
//   - per histogram concept, sum by (node, le) (rate(family_bucket[w])) and the
//     rates of _sum and _count.
//
// Ranks of one replica (Mapping.RankLabels: SGLang's tp_rank, pp_rank, …)
// count once. Gauges of such an engine are queried per node, replica and
// rank (sum by (node, replica labels, rank labels) (gauge), a few series per
// node) and the lowest ranks of each replica are kept here, exactly as
// engine.Extract does: pipeline stages may report different values, and
// PromQL cannot order label values. Counters and histograms, which would be
// multiplied by the ranks, are collapsed in PromQL instead, with
// max without (ranks) (rate(…)) before the per-node sum; ranks of one replica
// count the same requests. The aliases of one concept (older names, OpenTelemetry
// names) are joined with `or on (node)`, so each node reads the first one it
// exposes, in table order, in the same query. Queries for an engine without
// nodes are not sent. The number of queries per refresh therefore depends on
// the engines and the table, never on the number of nodes
// (Source.QueriesLastRefresh).
//
// Percentiles are computed here from the bucket rates with histogram.Quantile,
// which reproduces histogram_quantile: the P99 of a node is what
// histogram_quantile(0.99, sum by (node, le) (rate(x_bucket[w]))) answers,
// and every other quantile comes from the same query. The distributions'
// counts and sums are the rates times the window in seconds (the increase
// Prometheus extrapolates over the window); their means are rate(_sum) /
// rate(_count).
//
// With the lifetime window the counters and buckets are read cumulative,
// without rate, and token and request rates are the counters divided by the
// time since Mapping.Created (absent where the engine does not say).
//
// Every query is evaluated at one timestamp: now, or now − offset for
// Source.Window. Each has its own deadline (Config.Timeout). A query that
// fails leaves its concept absent, with an error, on every node of its
// engine; Prometheus warnings go into NodeMetrics.warnings of every node the
// query covered. When no query at all succeeds Refresh returns an error, and
// the refresh loop keeps the last good records, which go stale by
// themselves.
//
// Node ids and every other value that reaches PromQL go through one function,
// labelMatcher, which validates and quotes them (FuzzQueryBuilder parses the
// result with the real PromQL parser).
package prom
