// Package readygate keeps a Kubernetes readiness gate condition (serve
// --readiness-gate llmdiag.io/routable) on the pods that declare it in
// spec.readinessGates, from llmdiag's verdicts, so that the kubelet marks a
// pod not Ready, and Services and InferencePools stop sending it traffic,
// while llmdiag finds it not routable.
//
// What it promises:
//
//   - A pod's condition is True while every node it carries (its ranks or
//     ports: the nodes whose fleet labels namespace and pod name it)
//     is routable, and False while any is not, with the cause as reason
//     (Reason: CAUSE_KV_EXHAUSTED → KVExhausted, CAUSE_OVERLOADED →
//     Overloaded; Saturated when the fast lane read the queue or KV cache
//     saturated since the last verdict) and the one-line verdict as
//     message. Routability is store.Decide, the rule of GET
//     /routable/{node} and the HAProxy agent.
//   - It fails open: stale or UNKNOWN data ⇒ True; a pod with no verdict
//     Rules.Grace after its creation ⇒ True; on a graceful stop the Lease
//     holder sets every condition it holds False back to True (within
//     Options.StopDeadline) before it releases the Lease.
//   - At most Rules.MaxUnreadyFraction of a group's gated pods (its pool,
//     the label pool or inferencepool, else its model) are held False at
//     once: the most loaded by load score; the others are spared, True
//     with reason Spared and a message saying so, logged and counted.
//   - Only the holder of a coordination.k8s.io Lease writes (client-go's
//     leader election, released on cancel); a replica that loses it, or
//     whose last renewal is older than the lease duration, writes no more.
//   - A write happens only when the condition's status, reason or message
//     changes; lastTransitionTime only moves when the status does. Writes
//     are strategic merge patches of pods/status keyed by the condition
//     type, with field manager llmdiag and the pod's uid as a
//     precondition, rate-limited (Options.QPS, Burst): a write the limit
//     defers is written in its turn (the newest condition of its pod),
//     never dropped, and counted.
//   - Everything is bounded: the pods kept (Options.MaxPods; the informer
//     keeps only a few fields of every pod), the writes waiting (one per
//     pod), each write (Options.WriteTimeout).
//
// A crash is not a graceful stop: the conditions stay as last written
// until another replica takes the Lease (within the lease duration) and
// writes what its own plan says; with no replica left, a False condition
// stays until someone clears it (docs/integrations.md says how).
package readygate
