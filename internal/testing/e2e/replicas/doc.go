// Package replicas checks `llmdiag serve` as it is scaled out and as it
// fails: two replicas sharing a real Redis (one leader refreshes, a
// follower's subscribers see the leader's changes, Redis going down and
// coming back), fault isolation of the built binary beside 80 broken
// targets (hanging, failing, refusing), and that no password given in a
// target, Prometheus or Redis URL reaches a log, an answer or /metrics.
//
// The tests skip under -short.
package replicas
