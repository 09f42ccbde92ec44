// Package redistest runs real redis-server processes for tests.
//
// Start runs one redis-server on a free 127.0.0.1 port with its working
// directory in t.TempDir(), without persistence (--save "" --appendonly no)
// unless Options ask for it, and returns once it answers PING. StartCluster
// runs N cluster-enabled masters, joins them with
// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` and
// returns once every node's CLUSTER INFO says cluster_state:ok.
//
// Every process is stopped by its pid when the test ends (SIGTERM, SIGKILL
// after a timeout), and its output is logged if the test failed. Stop,
// Restart (same port and directory) and Kill (SIGKILL) are for outage tests.
//
// A missing redis-server or redis-cli fails the test with an install hint
// (apt-get install -y redis-server); only -short skips it.
// REDIS_SERVER_BIN and REDIS_CLI_BIN override the binaries found on PATH.
package redistest
