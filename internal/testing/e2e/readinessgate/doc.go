// Package readinessgate checks `llmdiag serve --readiness-gate` against a
// real Kubernetes control plane (internal/testing/kubetest, with
// kube-controller-manager's EndpointSlice controller and a stand-in for the
// kubelet's Ready condition): four pods of one model, each in front of a
// simulated engine on its own loopback address, a Service selecting them,
// and two serve replicas sharing the gate's Lease. A saturated pod's gate
// turns False within 2 s of llmdiag marking it unroutable and its endpoint
// turns not ready, then back; saturating every pod leaves at most half
// unready; only the Lease holder writes, the other takes over when it
// stops; a graceful stop sets every condition back to True.
//
// The tests skip under -short.
package readinessgate
