package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// defaultServeConfig is serve's configuration with every flag at its
// default, as register leaves it.
func defaultServeConfig(t *testing.T) *serveConfig {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &serveConfig{}
	c.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	c.setGiven(fs)
	c.redis.replicaID = "r1"
	return c
}

// TestServeConfigValidate: every check of serve's flags against each
// other, one row each, with the usage error it gives; the defaults pass.
func TestServeConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *serveConfig)
		want string // "" accepts
	}{
		{"defaults", func(*serveConfig) {}, ""},
		{"bad target", func(c *serveConfig) { _ = c.targets.Set("no-url") }, `--target "no-url": want id=url`},
		{"discovery", func(c *serveConfig) { c.discoveryPath = "sd.yaml" }, ""},
		{"discovery with fleet", func(c *serveConfig) { c.discoveryPath, c.fleetPath = "sd.yaml", "fleet.yaml" }, "--discovery goes with neither --fleet nor --target"},
		{"discovery with target", func(c *serveConfig) {
			c.discoveryPath = "sd.yaml"
			_ = c.targets.Set("a=http://127.0.0.1:1/metrics")
		}, "--discovery goes with neither --fleet nor --target"},
		{"discovery-debounce", func(c *serveConfig) { c.discoveryDebounce = 0 }, "--discovery-debounce must be positive"},
		{"interval", func(c *serveConfig) { c.interval = 0 }, "--interval, --stale-after, --scrape-timeout, --scrape-max-series and --scrape-max-ranks must be positive"},
		{"stale-after", func(c *serveConfig) { c.staleAfter = -time.Second }, "--interval, --stale-after"},
		{"scrape-timeout", func(c *serveConfig) { c.scrapeTimeout = 0 }, "--scrape-timeout"},
		{"scrape-max-series", func(c *serveConfig) { c.maxSeries = 0 }, "--scrape-max-series"},
		{"scrape-max-ranks", func(c *serveConfig) { c.maxRanks = -1 }, "--scrape-max-ranks must be positive"},
		{"fast-interval negative", func(c *serveConfig) { c.fastInterval = -time.Second }, "--fast-interval must not be negative and --fast-concurrency must be positive"},
		{"fast-concurrency", func(c *serveConfig) { c.fastConcurrency = 0 }, "--fast-concurrency must be positive"},
		{"fast-interval not below interval", func(c *serveConfig) { c.fastInterval = 5 * time.Second }, "--fast-interval 5s must be below --interval 5s (0 turns the fast lane off)"},
		{"fast lane", func(c *serveConfig) { c.fastInterval = 250 * time.Millisecond }, ""},
		{"scrape-spread", func(c *serveConfig) { c.scrapeSpread = -time.Second }, "--scrape-spread must not be negative"},
		{"offset-step", func(c *serveConfig) { c.offsetStep = -time.Second }, "--offset-step must not be negative and --max-request-queries must be positive"},
		{"max-request-queries", func(c *serveConfig) { c.requestQueries = 0 }, "--max-request-queries must be positive"},
		{"on-demand in flight", func(c *serveConfig) { c.prom.onDemandInFlight = 0 }, "--prometheus-on-demand-in-flight (0) must be at least 1 and less than --prometheus-max-in-flight (12)"},
		{"on-demand takes every slot", func(c *serveConfig) { c.prom.onDemandInFlight = 12 }, "--prometheus-on-demand-in-flight (12)"},
		{"retention below two intervals", func(c *serveConfig) { c.retention = 9 * time.Second }, "--retention 9s must be at least twice --interval (5s) and at least --stale-after (30s)"},
		{"retention below stale-after", func(c *serveConfig) { c.retention = 20 * time.Second }, "--retention 20s"},
		{"limits", func(c *serveConfig) { c.lim.rateBurst = 0 }, "--rate-burst and --http2-max-streams must be at least 1"},
		{"limits negative", func(c *serveConfig) { c.lim.maxConns = -1 }, "--max-connections, --max-conns-per-ip, --max-pending-conns-per-ip, --request-read-timeout and --handshake-timeout must not be negative"},
		{"conns per ip negative", func(c *serveConfig) { c.lim.maxConnsPerIP = -1 }, "--max-connections, --max-conns-per-ip, --max-pending-conns-per-ip, --request-read-timeout and --handshake-timeout must not be negative"},
		{"pending per ip negative", func(c *serveConfig) { c.lim.maxPendingPerIP = -1 }, "--max-connections, --max-conns-per-ip, --max-pending-conns-per-ip, --request-read-timeout and --handshake-timeout must not be negative"},
		{"handshake timeout negative", func(c *serveConfig) { c.lim.handshakeTimeout = -time.Second }, "--max-connections, --max-conns-per-ip, --max-pending-conns-per-ip, --request-read-timeout and --handshake-timeout must not be negative"},
		{"max-nodes", func(c *serveConfig) { c.maxNodes = 0 }, "--max-nodes 0 must be positive"},
		{"redis password without redis", func(c *serveConfig) { c.redis.passwordFile = "pw" }, "--redis-password-file without --redis"},
		{"redis", func(c *serveConfig) { c.redis.url = "redis://127.0.0.1:6379" }, ""},
		{"lease-ttl", func(c *serveConfig) { c.redis.url, c.redis.leaseTTL = "redis://127.0.0.1:6379", time.Millisecond }, "--lease-ttl must be at least"},
		{"replica-id", func(c *serveConfig) { c.redis.url, c.redis.replicaID = "redis://127.0.0.1:6379", "" }, "--replica-id not empty"},
		{"redis-sync", func(c *serveConfig) { c.redis.url, c.redis.syncEvery = "redis://127.0.0.1:6379", 0 }, "--redis-sync and --redis-full-sync positive"},
		{"redis-full-sync", func(c *serveConfig) { c.redis.url, c.redis.fullSyncEvery = "redis://127.0.0.1:6379", 0 }, "--redis-full-sync positive"},
		{"tls key without cert", func(c *serveConfig) { c.tls.key = "k.pem" }, "--tls-cert and --tls-key go together"},
		{"client ca without cert", func(c *serveConfig) { c.tls.clientCA = "ca.pem" }, "--tls-cert and --tls-key go together (and --tls-client-ca needs them)"},
		{"cert required without ca", func(c *serveConfig) { c.tls.cert, c.tls.key, c.tls.clientCertRequired = "c.pem", "k.pem", true }, "--tls-client-cert-required needs --tls-client-ca"},
		{"tls", func(c *serveConfig) { c.tls.cert, c.tls.key = "c.pem", "k.pem" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultServeConfig(t)
			tc.edit(c)
			err := c.validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate = %v, want a usage error saying %q", err, tc.want)
			}
		})
	}
}

// TestServeConfigDefaults: the defaults that depend on other flags. A
// thresholds file's stale_after counts unless --stale-after is given;
// without --replica-id the lease names this replica host-pid.
func TestServeConfigDefaults(t *testing.T) {
	c := defaultServeConfig(t)
	c.redis.replicaID = ""
	c.targets.nodes = nil
	_ = c.targets.Set("a=http://127.0.0.1:1/metrics")
	if _, _, err := c.configure(); err != nil {
		t.Fatal(err)
	}
	if want := defaultReplicaID(); c.redis.replicaID != want {
		t.Errorf("replica id %q, want %q", c.redis.replicaID, want)
	}
	c = defaultServeConfig(t)
	c.given["replica-id"], c.redis.replicaID, c.redis.url = true, "", "redis://127.0.0.1:6379"
	_ = c.targets.Set("a=http://127.0.0.1:1/metrics")
	if _, _, err := c.configure(); err == nil || !strings.Contains(err.Error(), "--replica-id not empty") {
		t.Errorf("--replica-id given empty: %v, want refused", err)
	}
}
