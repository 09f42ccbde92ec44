// Package chaos is a bounded chaos run of the whole service, and the
// checkers that judge it.
//
// # What it promises
//
// A run passes only if, while faults are injected one after another and
// then all together, no legitimate read fails outside a documented window,
// no client sees a node's verdict go back in time (never on one replica;
// across replicas by no more than the documented lag of a replica's copy),
// every health stream resumes after it breaks and delivers every injected
// change that a unary read saw, and each replica's goroutines and Go heap
// (its goal, which follows the heap live after a collection) end within
// 10% of where they started once the run has settled for up to two
// minutes, role for role: the lease holder against the lease holder at
// the start, a follower against a follower, and a follower that has held
// the lease (it keeps what it scraped, bounded by --window and
// --retention) against the lease holder. Each figure is taken over ten
// readings a second apart: the median goroutines, the lowest heap goal
// (the floor a leak raises). The run prints a Markdown table of
// its figures (calls made and failed, p99 latency against the quiet
// baseline of the same run, the longest staleness, failover time, lag
// between replicas, resources) and fails on any figure that broke its bound.
//
// # The run
//
// TestChaos (go test ./internal/testing/chaos -run TestChaos -chaos.full -v,
// or make chaos) starts, on loopback only, and stops by pid:
//
//   - the simulator's seed fleet (5 nodes) and 200 more simulated nodes,
//     each of the 200 behind a proxy of the run that can be made to hang
//     (accept, read, never answer), as a wedged exporter does;
//   - a real Prometheus scraping the seed fleet and the first 100 of the
//     200 every second;
//   - three `llmdiag serve` replicas of the built binary on one real Redis
//     (--redis, --lease-ttl, --replica-id), with a tokens file.
//
// The replicas read the seed fleet and the first 100 simulated nodes from
// Prometheus (--prometheus, --node-label node) and scrape the seed fleet
// and the other 100 directly (the fleet file gives their URLs). This is the
// production shape (Prometheus for history) joined with the fast path
// (direct scrapes for fresh gauges) on the seed fleet, so that one run
// exercises both sources and their join: pausing Prometheus must leave the
// directly scraped nodes fresh and the Prometheus-only nodes stale but
// answered, and hanging targets hit both the replicas' own scrapes and
// Prometheus's.
//
// Traffic is 50 legitimate clients, each with its own token and its own
// loopback source address (127.0.0.2 on), calling ListNodes, DiagnoseNode
// and GET /routable/{node} round-robin over the replicas, and health
// streams (client.Watch) on every replica. A flooding client opens idle
// TCP connections from 127.0.0.1, which never send a byte; the replicas
// run on their default connection limits, which hold it to
// --max-pending-conns-per-ip of them at once.
//
// The injections are: SIGKILL of the ingest lease holder (restarted once
// another replica holds the lease), Redis restarted (empty), Prometheus
// paused (SIGSTOP) and resumed (SIGCONT), 10% of the 200 targets hanging,
// a token added and another rotated in the tokens file, the connection
// flood, and a StreamHealth consumer that stops reading; first one after
// another, then all at once. Throughout, a few nodes are taken down and up
// again in the simulator: the changes every stream must deliver.
//
// Calls to the killed replica, from its SIGKILL until it serves again, are
// the one documented window: counted, not failures. Every other failed
// read fails the run.
//
// Under go test without -chaos.full only the checkers' own tests run.
package chaos
