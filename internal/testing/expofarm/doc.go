// Package expofarm is a cheap loopback exposition server for benchmarks at
// fleet scale: it serves N vLLM /metrics endpoints (1,000 and more) with
// realistic ~170 KB bodies whose routing gauges (vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc: the Queue, Running
// and KVUsage concepts of engine's table) change on a known schedule, and
// leaves the CPU to the process that reads them. It is not the simulator
// (package sim): nothing is simulated, the counters and histograms never
// move.
//
// # Serving
//
// New pre-renders one body (by default SeedBody: the simulator's seed
// DeepSeek node, vLLM V1 with 8 data-parallel engine cores, in
// testdata/vllm-seed.prom) into a template: the static text before the
// first gauge sample it patches, the short region holding every patched
// sample, and the static text after. A request writes the two static parts
// as they are and renders only the region (~3 KB) with the gauges of its
// node at that instant (Schedule) into a pooled buffer: no request
// allocates or copies a body, and nothing shared is written while
// requests read it.
//
// Endpoint i is http://127.0.0.1:PORT/n/0042/metrics (i zero-padded to at
// least 4 digits), the URL a fleet file's node takes. By default every
// endpoint has its own listener, as every node of a real fleet has its own
// host: an HTTP client keeps its idle connections per host, so one
// listener for all would make a client's per-host limit (2 for Go's
// default transport) apply to the whole farm. Config.Listeners spreads the
// endpoints over fewer.
//
// Bodies are always served as identity. llmdiag's scraper (source/scrape)
// sends no Accept-Encoding of its own; Go's transport offers gzip and
// takes identity as well, and compressing a body whose gauges change
// cannot be done once ahead.
//
// # Schedules
//
// Steps is the schedule benchmarks use: each node alternates between two
// Gauges every half period, node i's periods starting i·Stagger later,
// all anchored at the Unix epoch, so a parent process and the farm in a
// child agree on every change without talking (Steps.LastChange says when
// a node's gauges last changed).
//
// # Child process and driver
//
// StartChild runs a farm in a child process (the test binary run again, in
// the Test function that calls ServeChild), so a benchmark's getrusage
// (CPUTime) counts only its own work; the child reports its own CPU time
// and request count (Child.Stats) for the farm's cost per request.
//
// Drive reads a set of URLs at a cadence, each node on its own schedule
// with jitter, skipping a node's tick while its previous read is still
// running (or when every read slot is taken) rather than queueing behind
// it, and returns the CPU time the reading process used per second of wall
// time. What reads one node is a Reader: the full scrape-and-parse path
// or the fast lane's read.
package expofarm
