// Package engine knows the metric names of each inference engine and turns
// one /metrics exposition into an engine-neutral sample.Sample.
//
// The knowledge is one data table (see Lookup): per engine, per concept, the
// metric family names to read (current names first, then older aliases), what
// kind of value each is, and how the sub-series of a family (vLLM data-parallel
// engine cores, SGLang ranks) combine into one value per node. Parse reads
// the Prometheus text format with github.com/prometheus/common/expfmt, Detect
// tells the engine from the family names, and Extract fills a Sample. The same
// table is meant to drive the PromQL of a Prometheus-API source.
package engine
