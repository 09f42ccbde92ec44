// Package promstack checks llmdiag inside a real monitoring stack: a real
// Prometheus scraping the simulated fleet, llmdiag serving from
// Prometheus's HTTP API, the recording and alerting rules of `llmdiag
// rules` evaluated by Prometheus, alerts routed through a real
// Alertmanager to llmdiag's /alertmanager receiver and on to Slack and JSON
// sinks with the verdict attached, and every query of the Grafana
// dashboard `llmdiag dashboard` writes returning data; and the GPU
// figures of NVIDIA DCGM exporters joined through Prometheus
// (`--prometheus-dcgm-join`) answered as a direct scrape of the same
// exporters answers them: DCGM's sentinels, MIG instances, and pods
// sharing one exporter.
//
// The tests skip under -short.
package promstack
