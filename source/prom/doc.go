// Package prom reads the fleet from the Prometheus HTTP API: the
// production source of llmdiag.
//
// A refresh issues a fixed set of instant queries per engine of the mapping
// table (engine.Engines), each covering every node of that engine at once:
//
//   - identity: which nodes exist, one query per engine in three parts
//     joined with or on (node). Live nodes: max by (node, dp, tp, model
//     labels) (timestamp(…)) over every family of the engine — gauges,
//     counters and histograms' _count alike, so that an engine exporting no
//     gauge (trtllm-serve) is found — with their model, data- and
//     tensor-parallel degree (the distinct values of Mapping.DPLabel and
//     TPLabel) and when each was last scraped. Down nodes: up == 0 in a job
//     that served the engine's families within Config.Lookback, so that a
//     target Prometheus never scraped is found too. Vanished nodes: those
//     with the engine's series within the lookback and none now (target gone
//     from service discovery, or no longer exporting). Down and vanished
//     nodes are reported with Up false; for them the targets API
//     (/api/v1/targets?state=active, one request) gives Prometheus's last
//     scrape error where the server has it (Prometheus does, Thanos and
//     Mimir do not), which goes into NodeMetrics.errors. A node gone from
//     Prometheus for longer than the lookback is no longer reported;
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
//   - the cache and decoding effects (Mapping.Effects, LoRAInfo, Offload),
//     one query per engine that has any: its parts (each effect's counters
//     summed per node, gauges per node, replica and rank, the newest LoRA
//     info series per replica, one sample per node with a family of an
//     offload tier) are told apart by the label llmdiag_effect that
//     label_replace adds, and combined here as metrics.SetEffects combines
//     a direct scrape's.
//   - per KV-transfer concept of the engine (engine.KVTransferMapping: NIXL,
//     SGLang's disaggregation), one value per node, as the other counters;
//   - once for every engine, the values of the labels that say a node's
//     role (engine.RoleLabels), group by (node, labels), decided per node
//     by engine.RoleFrom as for a direct scrape. It is sent with the first
//     engine's data, and its failure fails no node: their roles then come
//     from the fleet file only, with a warning.
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
// A series born inside the window (engines create series on their first
// request) is read as rate reads it: nothing while Prometheus holds one
// sample of it in the range, then the increase from its first sample, not
// from 0, extrapolated back by at most half a scrape interval. The direct
// scrape counts such a series from 0 (package metrics); the difference, and
// why the queries keep rate's semantics, is in docs/engine-metrics.md,
// "Series that appear later".
//
// With the lifetime window the counters and buckets are read cumulative,
// without rate, and token and request rates are the counters divided by the
// time since Mapping.Created (absent where the engine does not say).
//
// Every query is evaluated at one timestamp: now, or now − offset for
// Source.Window. Queries are sent at most Config.Concurrency at a time, most
// important first: identity, then each engine's queue, running and KV
// gauges (the engines take turns), then the buckets, then the rest. The data
// queries of an engine go out when its identity reports nodes, or at once
// for the engines that had nodes at the last refresh.
//
// Each query has its own deadline, strictly shorter than the refresh's:
// Config.Timeout, or, when the context has a deadline, the time left until
// nine tenths of it (the last tenth is kept for assembling and storing what
// arrived). No query is sent with less time left than a twentieth of that
// span, or than the queries of the refresh have taken on average. A query
// that fails, times out or is not sent leaves its concept absent, with the
// error (a timeout named as such), on every node of its engine; what
// arrived is used. Prometheus warnings go into NodeMetrics.warnings of
// every node the query covered. Refresh returns an error (ErrNoData) when
// no identity query succeeded, or when no data query did while some failed:
// the refresh loop then keeps the last good records, which go stale by
// themselves.
//
// A node is reported only when an identity query found it; node ids must
// be valid fleet ids (fleet.ValidID: 1–128 letters, digits and ._:/-,
// starting with a letter or digit). Series with another id are skipped,
// counted (Source.InvalidNodeIDs) and logged once at warn level with a few
// examples, later at debug level.
//
// On-demand windows and offsets (Source.Window) are read for the whole
// fleet too, one read per window and offset, shared by concurrent requests
// and reused for source.Reuse; a request pays for a read from its
// source.Budget before it is sent. Queries in flight are bounded
// (Config.MaxInFlight), and on-demand reads hold at most
// Config.OnDemandInFlight of them, so a refresh always has slots of its own.
// Node ids never reach an on-demand query: the node is picked from the read.
//
// Node ids and every other value that reaches PromQL go through one function,
// labelMatcher, which validates and quotes them (FuzzQueryBuilder parses the
// result with the real PromQL parser).
package prom
