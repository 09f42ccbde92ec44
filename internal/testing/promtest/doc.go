// Package promtest runs a real Prometheus server for tests.
//
// Start finds the prometheus binary (PROMETHEUS_BIN, then PATH, then
// /usr/bin/prometheus; Debian's package: apt-get install -y prometheus),
// writes a prometheus.yml scraping the given loopback targets into a
// t.TempDir, starts Prometheus on a free 127.0.0.1 port with its TSDB in
// the same temporary directory, and waits until it reports ready. A missing
// binary fails the test with instructions; only -short skips it. The
// process is stopped when the test ends (SIGTERM to its pid, SIGKILL after
// a timeout), and its output is logged if the test failed.
//
// Options.RuleFiles and Options.Alertmanagers add rule files, evaluated
// every scrape interval, and the Alertmanagers (internal/testing/amtest) alerts go
// to.
//
// Options.ExtraScrapeConfigs carries whole scrape jobs; with no Targets
// they are the only ones (no default job), so a test can give Prometheus a
// discovery file's scrape_configs as they are. Options.Binary runs another
// prometheus: KubernetesSD returns one with Kubernetes service discovery
// (kubernetes_sd_configs), which the Debian package leaves out, built from
// hack/prombin by scripts/prombin.sh into $HOME/.cache/llmdiag/prombin.
//
// Stop and Restart take Prometheus down and bring it back on the same
// address and data directory, for resilience tests. Query, QueryVector and
// WaitForSamples talk to it through client_golang's v1 API. Every wait is
// bounded: by the caller's context deadline, or by a default when the
// context has none.
//
// Prometheus 2.42 hands static targets to its scrape manager on a 5-second
// tick, so the first scrape comes about 5 s after Start (and Restart)
// return; wait for data with WaitForScrapes or WaitForSamples rather than
// sleeping.
//
// Everything runs on loopback: targets must be loopback host:port pairs and
// Prometheus listens on 127.0.0.1 only.
package promtest
