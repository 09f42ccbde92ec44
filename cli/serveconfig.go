package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/lease"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
)

// serveConfig is serve's whole configuration: the value of every flag,
// filled by the flag set register defines (and the LLMDIAG_* environment,
// withEnv), checked by validate, read by the steps of runServe. Each
// group of flags is a value of its own, defined next to the code that
// uses it (limits.go, tls.go, security.go, alerts.go, slack.go,
// tracing.go, healthlisten.go, haproxyagent.go).
type serveConfig struct {
	listen, fleetPath, thresholdsFile string
	targets                           targetsFlag
	window                            metrics.Window
	// discoveryPath is --discovery's file (cli/discovery.go).
	discoveryPath     string
	discoveryDebounce time.Duration

	interval, staleAfter, scrapeTimeout, scrapeSpread time.Duration
	fastInterval                                      time.Duration
	fastConcurrency                                   int
	maxSeries, maxRanks                               int
	retention                                         time.Duration
	maxNodes, historyLen                              int
	grace                                             time.Duration
	offsetStep                                        time.Duration
	requestQueries                                    int
	mcp, console                                      bool
	// routableFailOpen is --routable-fail-open (server.RoutableOptions).
	routableFailOpen bool

	redis  redisConfig
	sec    securityConfig
	lim    limitConfig
	prom   promConfig
	tls    serveTLSConfig
	alerts alertConfig
	slack  slackConfig
	trace  traceConfig
	health healthListenConfig
	// haproxy is --haproxy-agent-listen (cli/haproxyagent.go).
	haproxy haproxyAgentConfig
	// gate is --readiness-gate (cli/readinessgate.go).
	gate readinessGateConfig
	log  logConfig

	// given holds the names of the flags set on the command line or by
	// the environment (setGiven): a few defaults depend on whether a
	// flag was given at all.
	given map[string]bool
}

// redisConfig is serve's configuration of the shared state in Redis.
type redisConfig struct {
	url, passwordFile, prefix, replicaID string
	leaseTTL, syncEvery, fullSyncEvery   time.Duration
}

// ServeFlagSet returns the flags `llmdiag serve` takes, defined with their
// defaults and not parsed, for checking configuration written elsewhere
// (deploy/'s manifests) against the binary's own flags.
func ServeFlagSet() *flag.FlagSet { return serveCommand(Env{}).FlagSet }

// register defines every serve flag on fs, filling c.
func (c *serveConfig) register(fs *flag.FlagSet) {
	c.window = metrics.DefaultWindow
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to serve Connect, gRPC, gRPC-Web, health, reflection and /metrics on")
	fs.StringVar(&c.fleetPath, "fleet", "", "fleet file (YAML): nodes with id, url, model, engine and profile")
	fs.Var(&c.targets, "target", "a node to scrape, as id=url[,model=NAME][,engine=vllm|sglang][,follow_redirects=true]; repeatable, adds to --fleet")
	fs.StringVar(&c.discoveryPath, "discovery", "", "discovery file (YAML): scrape_configs in Prometheus's own schema (kubernetes_sd_configs, file_sd_configs, http_sd_configs, dns_sd_configs, static_configs, relabel_configs), run by Prometheus's service discovery; the nodes it finds are scraped and follow it as they come and go (docs/configuration.md, Discovery). Not with --fleet or --target")
	fs.DurationVar(&c.discoveryDebounce, "discovery-debounce", fleetsd.DefaultDebounce, "with --discovery: changes are applied at most this often (Prometheus's own default; after a quiet spell a change goes in a fraction of a second), each with a refresh at once; a node set follows discovery within about this")
	fs.DurationVar(&c.interval, "interval", 5*time.Second, "time between refreshes of the whole fleet")
	fs.DurationVar(&c.fastInterval, "fast-interval", 0, "the fast lane for routers: read queue, running and KV usage of every node with a url this often (e.g. 250ms), between refreshes, and update routability and load score at once (docs/integrations.md, The fast lane for routers); 0, the default, leaves it off: it reads each node's /metrics this often, a cost the model servers pay")
	fs.IntVar(&c.fastConcurrency, "fast-concurrency", 64, "most fast-lane reads in flight; a node's tick finding none free is skipped, never queued")
	fs.Var(&c.window, "window", "default window verdicts are computed for")
	fs.DurationVar(&c.staleAfter, "stale-after", 30*time.Second, "data older than this is stale: verdicts become UNKNOWN")
	fs.DurationVar(&c.scrapeTimeout, "scrape-timeout", 3*time.Second, "deadline of one scrape; a refresh waits no longer for slow targets (they are reported from their last scrape meanwhile), so keep it below --interval")
	fs.DurationVar(&c.scrapeSpread, "scrape-spread", 0, "start a refresh's scrapes over this span instead of all at once (each node keeps its place in it), so that a large fleet's parsing does not take every core in one burst; 0, the default, starts them at once, except with --fast-interval: then half of --interval (at most half of --stale-after), so that the fast reads never wait for CPU; set it to change that")
	fs.IntVar(&c.maxSeries, "scrape-max-series", engine.DefaultMaxSeries, "refuse a scraped exposition with more series than this (every histogram bucket counts, as in Prometheus); the parse stops there and the node reads UNKNOWN with the limit named")
	fs.IntVar(&c.maxRanks, "scrape-max-ranks", engine.DefaultMaxRankValues, "refuse a scraped exposition with more distinct values than this of one rank label (vLLM's engine, SGLang's dp_rank, tp_rank, pp_rank, moe_ep_rank, pid)")
	fs.DurationVar(&c.retention, "retention", refresh.DefaultRetention, "how long llmdiag remembers: samples kept for on-demand windows (a direct scrape keeps every sample of --window and two intervals, the first of each minute before), and a node its source has not presented for this long is forgotten (store, streams, --redis keys)")
	fs.IntVar(&c.maxNodes, "max-nodes", refresh.DefaultMaxNodes, "most nodes kept; beyond it new nodes are refused (logged each refresh, counted in llmdiag_nodes_refused_total) while known ones keep refreshing")
	fs.IntVar(&c.historyLen, "history", memory.DefaultHistoryLen, "refreshes kept per node for spike-vs-sustained reasoning")
	fs.StringVar(&c.thresholdsFile, "thresholds", "", "thresholds file (YAML, see llmdiag thresholds); keys it leaves out keep their defaults; --stale-after, when given, overrides its stale_after")
	fs.DurationVar(&c.grace, "shutdown-grace", 10*time.Second, "time open requests get to finish on SIGTERM")
	c.sec.register(fs)
	c.redis.register(fs)
	fs.DurationVar(&c.offsetStep, "offset-step", 0, "with --prometheus: finest step on-demand offsets are rounded to, so that nearby offsets share one read (0: --interval); a tenth of the window when larger. Direct scrapes read offsets as asked unless this is set")
	fs.IntVar(&c.requestQueries, "max-request-queries", server.DefaultRequestQueryBudget, "queries to --prometheus one request may cause; a request that needs more is refused (resource exhausted)")
	fs.BoolVar(&c.mcp, "mcp", true, "serve the MCP server (tools and runbooks for AI agents) over streamable HTTP at /mcp, behind the same authentication; --mcp=false turns it off")
	fs.BoolVar(&c.console, "console", true, "serve the web console (the fleet, each node, comparisons; embedded, works offline) at / and its files under /console/; its data comes from the procedures with the token the person enters; --console=false turns it off")
	fs.BoolVar(&c.routableFailOpen, "routable-fail-open", true, "GET /routable/{node} (the router role's HTTP check for proxies' health checkers) answers 200 \"routable (stale)\" with X-Llmdiag-Stale: true when the node's data is older than --stale-after or unknown, and GetRoutability (GET /v1/nodes/{node}/routable) routable with stale set; --routable-fail-open=false answers 503, and not routable, instead (docs/integrations.md, HTTP health checks)")
	c.lim.register(fs)
	c.prom.register(fs)
	c.tls.register(fs)
	c.alerts.register(fs) // the Alertmanager receiver, cli/alerts.go
	c.slack.register(fs)
	c.trace.register(fs)   // OpenTelemetry, cli/tracing.go
	c.health.register(fs)  // grpc.health.v1 in plaintext for probes, cli/healthlisten.go
	c.haproxy.register(fs) // HAProxy's agent check, cli/haproxyagent.go
	c.gate.register(fs)    // Kubernetes readiness gates, cli/readinessgate.go
	c.log.register(fs)
}

// register defines the Redis flags on fs, filling r.
func (r *redisConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&r.url, "redis", "", "keep state in this Redis, shared by replicas: redis://[user:password@]host:port[/db] (rediss:// for TLS); several host:port separated by commas for a Cluster. One replica at a time (the ingest lease holder) refreshes; all serve")
	fs.StringVar(&r.passwordFile, "redis-password-file", "", "file holding the password for --redis (then not in its URL, nor in the process list; read anew for every new connection); the URL's user, if any, goes with it")
	fs.StringVar(&r.prefix, "redis-prefix", redisstore.DefaultPrefix, "prefix of every Redis key; replicas with the same prefix share state and the ingest lease")
	fs.DurationVar(&r.leaseTTL, "lease-ttl", 10*time.Second, "ingest lease period with --redis: the leader renews every third of it; a dead leader is replaced after about this long")
	fs.StringVar(&r.replicaID, "replica-id", "", "this replica's name in the ingest lease (with --redis); default: the host name and the process id, as host-pid")
	fs.DurationVar(&r.syncEvery, "redis-sync", time.Second, "with --redis: how often this replica copies the shared state into memory; reads are answered from the copy, so at most about this much behind Redis, and keep being answered (marked degraded) while Redis is down")
	fs.DurationVar(&r.fullSyncEvery, "redis-full-sync", replica.DefaultFullEvery, "with --redis: how often this replica reads the whole shared state; the syncs between read only the nodes written since the last one (and the ids of those listed), so this bounds how long a drift could last")
}

// setGiven records which of fs's flags were set, on the command line or
// by the environment.
func (c *serveConfig) setGiven(fs *flag.FlagSet) {
	c.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
}

// configure reads the thresholds, resolves the defaults that depend on
// other flags, checks the configuration (validate), and reads the
// Alertmanager sinks and the fleet: every usage error before anything is
// opened.
func (c *serveConfig) configure() (diagnose.Thresholds, *fleet.File, error) {
	th, thKeys, err := loadThresholdsKeys(c.thresholdsFile)
	if err != nil {
		return th, nil, err
	}
	if thKeys["stale_after"] && !c.given["stale-after"] {
		c.staleAfter = th.StaleAfter
	}
	th.StaleAfter = c.staleAfter
	if c.redis.replicaID == "" && !c.given["replica-id"] {
		c.redis.replicaID = defaultReplicaID()
	}
	if err := c.validate(); err != nil {
		return th, nil, err
	}
	if c.offsetStep == 0 && c.prom.url != "" {
		c.offsetStep = c.interval
	}
	if err := c.alerts.load(); err != nil {
		return th, nil, err
	}
	f := &fleet.File{}
	if c.discoveryPath != "" {
		return th, f, nil // the nodes come from discovery (cli/discovery.go)
	}
	if c.fleetPath != "" {
		if f, err = fleet.Load(c.fleetPath); err != nil {
			return th, nil, err
		}
	}
	f.Nodes = append(f.Nodes, c.targets.nodes...)
	if err := f.Validate(); err != nil {
		return th, nil, usageError{err}
	}
	if c.prom.url == "" {
		if len(f.Nodes) == 0 {
			return th, nil, usageError{errors.New("no nodes to watch: give --prometheus URL, --fleet FILE or --target id=url")}
		}
		for _, n := range f.Nodes {
			if n.URL == "" {
				return th, nil, usageError{fmt.Errorf("node %q has no url to scrape (or read the fleet from --prometheus)", n.ID)}
			}
		}
	}
	return th, f, nil
}

// validate checks the flags' values and how they go together, reading no
// file: a usage error naming the flags, or nil.
func (c *serveConfig) validate() error {
	if err := c.check(); err != nil {
		return usageError{err}
	}
	return nil
}

func (c *serveConfig) check() error {
	switch {
	case c.targets.err != nil:
		return c.targets.err
	case c.discoveryPath != "" && (c.fleetPath != "" || len(c.targets.nodes) > 0):
		return errors.New("--discovery goes with neither --fleet nor --target: the nodes are discovery's (put fixed targets in its static_configs)")
	case c.discoveryDebounce <= 0:
		return errors.New("--discovery-debounce must be positive")
	case c.interval <= 0 || c.staleAfter <= 0 || c.scrapeTimeout <= 0 || c.maxSeries <= 0 || c.maxRanks <= 0:
		return errors.New("--interval, --stale-after, --scrape-timeout, --scrape-max-series and --scrape-max-ranks must be positive")
	case c.fastInterval < 0 || c.fastConcurrency <= 0:
		return errors.New("--fast-interval must not be negative and --fast-concurrency must be positive")
	case c.fastInterval > 0 && c.fastInterval >= c.interval:
		return fmt.Errorf("--fast-interval %s must be below --interval %s (0 turns the fast lane off)", c.fastInterval, c.interval)
	case c.scrapeSpread < 0:
		return errors.New("--scrape-spread must not be negative")
	case c.offsetStep < 0 || c.requestQueries <= 0:
		return errors.New("--offset-step must not be negative and --max-request-queries must be positive")
	case c.prom.onDemandInFlight < 1 || c.prom.maxInFlight <= c.prom.onDemandInFlight:
		return fmt.Errorf("--prometheus-on-demand-in-flight (%d) must be at least 1 and less than --prometheus-max-in-flight (%d), so that refreshes keep slots of their own", c.prom.onDemandInFlight, c.prom.maxInFlight)
	case c.retention < 2*c.interval || c.retention < c.staleAfter:
		return fmt.Errorf("--retention %v must be at least twice --interval (%v) and at least --stale-after (%v)", c.retention, c.interval, c.staleAfter)
	case c.maxNodes <= 0:
		return fmt.Errorf("--max-nodes %d must be positive", c.maxNodes)
	}
	if err := c.gate.check(); err != nil {
		return err
	}
	for _, check := range []func() error{c.tls.check, c.lim.check, c.redis.check} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// check refuses Redis flags that do not go together.
func (r redisConfig) check() error {
	if r.passwordFile != "" && r.url == "" {
		return errors.New("--redis-password-file without --redis")
	}
	if r.url != "" && (r.leaseTTL < lease.MinTTL || r.replicaID == "" || r.syncEvery <= 0 || r.fullSyncEvery <= 0) {
		return fmt.Errorf("--lease-ttl must be at least %v, --replica-id not empty, --redis-sync and --redis-full-sync positive", lease.MinTTL)
	}
	return nil
}

// spread is the span a refresh's scrapes start over (defaultSpread).
func (c *serveConfig) spread() time.Duration {
	return defaultSpread(c.given["scrape-spread"], c.scrapeSpread, c.fastInterval, c.interval, c.staleAfter)
}

// defaultSpread is --scrape-spread when set; otherwise none, or with the
// fast lane half the interval, and at most half of --stale-after, so that
// the first nodes' samples are never stale by the time the refresh
// diagnoses them.
func defaultSpread(set bool, spread, fast, interval, staleAfter time.Duration) time.Duration {
	if set || fast <= 0 {
		return spread
	}
	return min(interval, staleAfter) / 2
}

// defaultReplicaID is hostname-pid.
func defaultReplicaID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "llmdiag"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// targetsFlag collects repeated --target id=url[,model=…,engine=…,follow_redirects=true]
// values. A malformed one is kept in err, reported by serve: the flag
// package would quote the value, and with it a password in its URL.
type targetsFlag struct {
	nodes []fleet.Node
	err   error
}

func (t *targetsFlag) String() string { return fmt.Sprint(len(t.nodes), " targets") }

func (t *targetsFlag) Set(v string) error {
	n, err := parseTarget(v)
	if err != nil {
		t.err = errors.Join(t.err, fmt.Errorf("--target %q: %w", redact.Text(v), err))
		return nil
	}
	t.nodes = append(t.nodes, n)
	return nil
}

func parseTarget(v string) (fleet.Node, error) {
	parts := strings.Split(v, ",")
	id, u, ok := strings.Cut(parts[0], "=")
	if !ok {
		return fleet.Node{}, errors.New("want id=url[,model=NAME][,engine=NAME][,follow_redirects=true]")
	}
	n := fleet.Node{ID: id, URL: u}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		switch k {
		case "model":
			n.Model = val
		case "engine":
			n.Engine = val
		case "follow_redirects":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return fleet.Node{}, fmt.Errorf("follow_redirects=%q: want true or false", val)
			}
			n.FollowRedirects = b
		default:
			return fleet.Node{}, fmt.Errorf("unknown target attribute %q (want model, engine or follow_redirects)", k)
		}
	}
	return n, nil
}

// promConfig is serve's configuration of --prometheus.
type promConfig struct {
	url, bearer, user, password, ca, cert, key, serverName, nodeLabel, modelLabels, dcgmJoin string
	insecure                                                                                 bool
	timeout                                                                                  time.Duration
	maxInFlight, onDemandInFlight                                                            int
	headers                                                                                  headersFlag
}

// register defines the --prometheus flags on fs, filling p.
func (p *promConfig) register(fs *flag.FlagSet) {
	p.headers = headersFlag{}
	fs.StringVar(&p.url, "prometheus", "", "read the fleet from this Prometheus (or Thanos, Mimir, VictoriaMetrics) instead of scraping it")
	fs.StringVar(&p.bearer, "prometheus-bearer-token-file", "", "file holding a bearer token for --prometheus (re-read on every request)")
	fs.StringVar(&p.user, "prometheus-basic-auth-user", "", "basic-auth user for --prometheus")
	fs.StringVar(&p.password, "prometheus-basic-auth-password-file", "", "file holding the basic-auth password for --prometheus")
	fs.Var(p.headers, "prometheus-header", "extra request header for --prometheus, as \"Name: value\"; repeatable")
	fs.StringVar(&p.ca, "prometheus-ca-file", "", "CA certificate to verify --prometheus with")
	fs.StringVar(&p.cert, "prometheus-cert-file", "", "client certificate for --prometheus")
	fs.StringVar(&p.key, "prometheus-key-file", "", "client key for --prometheus")
	fs.StringVar(&p.serverName, "prometheus-server-name", "", "server name to verify --prometheus's certificate against")
	fs.BoolVar(&p.insecure, "prometheus-insecure-skip-verify", false, "do not verify --prometheus's certificate (testing only)")
	fs.DurationVar(&p.timeout, "prometheus-timeout", 10*time.Second, "deadline of one query to --prometheus")
	fs.IntVar(&p.maxInFlight, "prometheus-max-in-flight", 12, "queries to --prometheus in flight at once, refreshes and on-demand windows together")
	fs.IntVar(&p.onDemandInFlight, "prometheus-on-demand-in-flight", 4, "of --prometheus-max-in-flight, the most on-demand windows, offsets and baselines may use; the rest are the refresh's own")
	fs.StringVar(&p.nodeLabel, "node-label", prom.DefaultNodeLabel, "label that identifies a node in --prometheus")
	fs.StringVar(&p.modelLabels, "model-label", strings.Join(prom.DefaultModelLabels(), ","), "labels that may carry the served model, in order of preference")
	fs.StringVar(&p.dcgmJoin, "prometheus-dcgm-join", "", "read the NVIDIA DCGM exporter's GPU series from --prometheus and join them to nodes by these labels, tried in order (e.g. Hostname,pod,instance); empty: no GPU figures")
}

// config is the prom.Config asked for.
func (p promConfig) config(staleAfter time.Duration) prom.Config {
	return prom.Config{
		URL:                   p.url,
		BearerTokenFile:       p.bearer,
		BasicAuthUser:         p.user,
		BasicAuthPasswordFile: p.password,
		Headers:               p.headers,
		TLS: prom.TLSConfig{
			CAFile: p.ca, CertFile: p.cert, KeyFile: p.key,
			ServerName: p.serverName, InsecureSkipVerify: p.insecure,
		},
		Timeout:          p.timeout,
		MaxInFlight:      p.maxInFlight,
		OnDemandInFlight: p.onDemandInFlight,
		NodeLabel:        p.nodeLabel,
		StaleAfter:       staleAfter,
		ModelLabels:      labelList(p.modelLabels),
		DCGMJoin:         labelList(p.dcgmJoin),
	}
}

// labelList reads a comma-separated list of label names, leaving out
// empty ones; nil when there is none.
func labelList(s string) []string {
	var labels []string
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			labels = append(labels, l)
		}
	}
	return labels
}

// headersFlag collects repeated --prometheus-header "Name: value" values.
type headersFlag map[string]string

func (h headersFlag) String() string { return fmt.Sprint(len(h), " headers") }

func (h headersFlag) Set(v string) error {
	name, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want \"Name: value\", got %q", v)
	}
	h[strings.TrimSpace(name)] = strings.TrimSpace(val)
	return nil
}
