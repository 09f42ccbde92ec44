// Package closedloop measures what steering with llmdiag buys behind a
// real HAProxy: two arms run at once on the same machine, each with its
// own simulated fleet of four alike nodes (one model, external load only)
// behind its own HAProxy balancing by least connections with HTTP health
// checks; arm B's HAProxy also asks llmdiag's agent (serve
// --haproxy-agent-listen, fast lane on) every 500 ms. loadgen sends both
// the same Poisson arrivals at 70% of the fleet's capacity (Capacity:
// measured on the simulator's own model), through a warm-up, a baseline,
// a phase with one node slowed (sim.Fleet.SetSlowdown) and a phase with
// that node hung (sim.Fleet.SetHang). Run returns, per arm and phase, the
// client's TTFT and E2E percentiles and failures, each server's new
// requests (HAProxy's stot counters), and for arm B when the agent
// flagged the node. Its tests assert the mechanism on one repetition;
// its benchmark reports the medians of the acceptance ratios over three
// (docs/integrations.md, What steering buys).
package closedloop
