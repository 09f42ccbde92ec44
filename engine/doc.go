// Package engine knows the metric names of each inference engine and turns
// one /metrics exposition into an engine-neutral sample.Sample.
//
// The knowledge is one data table (see Lookup): per engine, per concept, the
// metric family names to read (current names first, then older aliases), what
// kind of value each is, and how the sub-series of a family (vLLM data-parallel
// engine cores, SGLang ranks, Triton models) combine into one value per node.
// Parse reads the Prometheus text format line by line with Prometheus's own
// parser (github.com/prometheus/prometheus/model/textparse), leaves out every
// family a Prometheus would not store as given or that is not a valid
// histogram, with a warning, and refuses a body over its Limits at the line
// that crossed them; Detect tells the engine from the family names, and
// Extract fills a Sample.
// The same table drives the PromQL of the Prometheus-API source (source/prom).
//
// # The fast reader
//
// ReadRouting reads only what a router needs of a node — queue, running,
// KV usage and the KV capacity that weighs it (and SGLang's used tokens,
// which give its usage) — for a fast lane that reads every node several
// times a second. It streams the exposition and tells each line by its
// first bytes: a line of a routing family (its name, or the name with
// _bucket, _sum or _count) goes to Parse's own line builder, any other is
// counted if it is a sample and skipped unparsed. The values come from
// Extract's code on the routing families (the two share extractor.routing),
// so they are Extract's to the bit; engine/routing_test.go checks it on
// every exposition of testdata and of every simulator scenario. Since the
// text format gives a family's lines as one group, the read stops at the
// first line of another family once every routing concept is settled:
// its family of first preference that has a series has been read whole.
// It honours Limits with Parse's errors for the lines it reads (rank
// values are counted on the routing families only), and refuses a body
// cut short before it stops. On the seed's 170 KB vLLM exposition
// (BenchmarkRoutingFast, BenchmarkRoutingFull) it costs a twentieth to a
// fortieth of Parse and Extract, most of it building the 32 routing series;
// skipping the other 1,900 lines is about a seventh of it.
//
// # The series memo
//
// A SeriesMemo (memo.go) remembers what Prometheus's parser made of each
// line read through it: a sample line's series by the bytes before its
// value, HELP and TYPE lines by their bytes. A line it knows is read by its
// value alone, when the parser would read that value the same way; every
// other check of a read is made as without it, so the result is the same
// (memo_test.go reads every exposition of testdata through a fresh, a
// learnt and a shared memo, and changes lines every way the parser tells
// apart). Replicas of a model expose the same series, so one memo serves a
// fleet: ReadRouting and ParseMemo take one, the fast lane and the scraper
// each keep one. A GPU exporter's series are its own GPUs': it is read
// without one (a memo of each exporter's would cost some 140 KB a node). Through a warm memo ReadRouting of the seed's exposition
// costs about half, and Parse and Extract about two thirds
// (BenchmarkRoutingFastMemo, BenchmarkRoutingFullMemo).
//
// # Engines
//
// vLLM (vllm:, and vllm_ when routed through OpenTelemetry, counters with or
// without _total), SGLang (sglang:, current labels and the 2024 scheme with
// label name), TensorRT-LLM (trtllm_), Triton with the TensorRT-LLM backend
// (nv_trt_llm_ and Triton's nv_inference_), TGI (tgi_) and the NVIDIA Dynamo
// HTTP frontend (dynamo_frontend_). A concept an engine does not expose stays
// nil — UNKNOWN, never 0.
//
// # Per-node aggregation
//
// How each concept becomes one value per node. Ranks that report the same
// scheduler state (SGLang tensor- and pipeline-parallel ranks) are
// deduplicated first: per replica only the lowest tp_rank, then pp_rank, is
// read. Then: requests and tokens are summed over data-parallel replicas
// (vLLM engine cores, SGLang dp_rank); KV usage is averaged weighted by each
// replica's KV capacity (the plain mean when a capacity is unknown);
// histograms are summed bucket by bucket (replicas must share one bucket
// layout); Triton's per-model request counters take the largest model (the
// ensemble or BLS model encloses the ones it calls, so a sum would count a
// request several times; a model's series, one per failure reason, are
// summed first). "—" is not exposed: UNKNOWN. A counter that an engine
// creates with its first event (an abort) is UNKNOWN until then, as
// llmdiag cannot tell "none yet" from "not counted".
//
//	| concept | vLLM | SGLang | TRT-LLM | Triton (TRT-LLM backend) | TGI | Dynamo frontend |
//	|---|---|---|---|---|---|---|
//	| queue | num_requests_waiting, sum over engine cores | num_queue_reqs, ranks deduplicated, sum over dp_rank × engine_type | num_requests_waiting | request_metrics{request_type="waiting"}, sum over models | tgi_queue_size | queued_requests (waiting for first token, prefill included), sum over models |
//	| running | num_requests_running, sum over engine cores | num_running_reqs, as queue | num_requests_running | request_metrics{request_type="scheduled"}, sum over models | tgi_batch_current_size | inflight (active) − queued requests, clamped at 0 |
//	| KV usage 0–1 | kv_cache_usage_perc, capacity-weighted over engine cores | Σ num_used_tokens / Σ max_total_num_tokens (else token_usage, capacity-weighted) | kv_cache_utilization | kv_cache_block_metrics{…="fraction"}, capacity-weighted over models | — | — (workers expose it) |
//	| KV capacity, tokens | Σ num_gpu_blocks × block_size (cache_config_info) | Σ max_total_num_tokens, ranks deduplicated | kv_cache_max_blocks × kv_cache_tokens_per_block | Σ "max" × "tokens_per" blocks | — | model_total_kv_blocks × model_kv_cache_block_size (one worker) |
//	| prompt tokens | Σ prompt_tokens counter | prompt_tokens_total | — | — | tgi_request_input_length histogram _sum | input_sequence_tokens histogram _sum |
//	| generation tokens | Σ generation_tokens counter | generation_tokens_total | — | — | tgi_request_generated_tokens histogram _sum | output_tokens_total |
//	| preemptions | Σ num_preemptions counter | num_retracted_requests_total (else num_retractions _sum) | — | — | — | — |
//	| requests finished | Σ request_success over finished_reason | num_requests_total (else E2E _count) | Σ request_success over finished_reason | nv_inference_request_success, largest model | tgi_request_success | Σ requests_total over status |
//	| requests aborted or failed | Σ request_success{finished_reason=~"abort|error"} | num_aborted_requests_total (appears with the first abort) | Σ request_success{finished_reason=~"abort|cancelled|error"} (a reason appears with its first request) | nv_inference_request_failure, Σ over reason, largest model | Σ tgi_request_failure over err (appears with the first failure) | requests_total{status="error"} |
//	| TTFT | histogram, Σ by bucket over engine cores | histogram, Σ by bucket | histogram | — | — | histogram |
//	| E2E | histogram, Σ by bucket | histogram, Σ by bucket | histogram | mean only: nv_inference_request_duration_us / request_success, largest model each | histogram | histogram |
//	| inter-token | histogram, Σ by bucket | histogram, Σ by bucket | — | — | — | histogram |
//	| time per output token | histogram, Σ by bucket | histogram (older SGLang) | histogram | — | mean_time_per_token histogram | — |
//	| queue time | histogram, Σ by bucket | histogram, Σ by bucket | histogram | mean only: nv_inference_queue_duration_us / request_success, largest model each | histogram | — |
//
// Families of other exporters on the same endpoint are ignored, in
// particular the dynamo_component_… families a Dynamo worker exposes next to
// its engine's: such an endpoint is the engine's (vLLM, SGLang, TRT-LLM),
// and only dynamo_frontend_… families make a Dynamo frontend.
package engine
