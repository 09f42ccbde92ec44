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
// TestClosedLoop closes the loop: traffic from package loadgen at 70% of
// the engines' capacity goes through a Service proxy that, as kube-proxy
// does, sends each request only to endpoints the EndpointSlices list as
// ready; one engine is slowed tenfold, then hung. A hung pod leaves the
// EndpointSlice within llmdiag's stall detection plus 2 s, and gets no
// request while it is out; each time llmdiag marks the slowed pod
// unroutable its endpoint is not ready within 2 s. The test logs how long
// each faulty pod stayed a ready endpoint and the clients' latencies.
//
// The tests skip under -short.
package readinessgate
