// Package promstack checks llmdiag inside a real monitoring stack: a real
// Prometheus scraping the simulated fleet, llmdiag serving from
// Prometheus's HTTP API, the recording and alerting rules of `llmdiag
// rules` evaluated by Prometheus, alerts routed through a real
// Alertmanager to llmdiag's /alertmanager receiver and on to Slack and JSON
// sinks with the verdict attached, and every query of the Grafana
// dashboard `llmdiag dashboard` writes returning data.
//
// The tests skip under -short.
package promstack
