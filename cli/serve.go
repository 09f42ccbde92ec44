package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/console"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/lease"
	"github.com/llmdiag/llmdiag/mcpserver"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/runbook"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/combine"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
	"github.com/llmdiag/llmdiag/telemetry"
	"github.com/llmdiag/llmdiag/tracing"
)

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

// serveFlags are serve's flags, read by the steps of runServe.
type serveFlags struct {
	fs                                                    *flag.FlagSet
	listen, fleetPath, window, thresholdsFile             *string
	targets                                               targetsFlag
	interval, staleAfter, scrapeTimeout, retention, grace *time.Duration
	scrapeSpread                                          *time.Duration
	maxSeries, maxRanks, maxNodes, historyLen             *int
	redisURL, redisPasswordFile, redisPrefix, replicaID   *string
	leaseTTL, syncEvery, fullSyncEvery, offsetStep        *time.Duration
	fastInterval                                          *time.Duration
	fastConcurrency                                       *int
	requestQueries                                        *int
	mcp, console                                          *bool
	sec                                                   securityFlagSet
	lim                                                   limitFlagSet
	prom                                                  promFlagSet
	tls                                                   serveTLSFlags
	alerts                                                *alertFlagSet
	slack                                                 slackFlagSet
	trace                                                 traceFlagSet
	health                                                healthListenFlag
	newLog                                                func(io.Writer) (*slog.Logger, error)
}

func serveCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag serve", flag.ContinueOnError)
	c := &serveFlags{fs: fs}
	c.listen = fs.String("listen", "127.0.0.1:8080", "address to serve Connect, gRPC, gRPC-Web, health, reflection and /metrics on")
	c.fleetPath = fs.String("fleet", "", "fleet file (YAML): nodes with id, url, model, engine and profile")
	fs.Var(&c.targets, "target", "a node to scrape, as id=url[,model=NAME][,engine=vllm|sglang][,follow_redirects=true]; repeatable, adds to --fleet")
	c.interval = fs.Duration("interval", 5*time.Second, "time between refreshes of the whole fleet")
	c.fastInterval = fs.Duration("fast-interval", 0, "the fast lane for routers: read queue, running and KV usage of every node with a url this often (e.g. 250ms), between refreshes, and update routability and load score at once (README, The fast lane); 0, the default, leaves it off: it reads each node's /metrics this often, a cost the model servers pay")
	c.fastConcurrency = fs.Int("fast-concurrency", 64, "most fast-lane reads in flight; a node's tick finding none free is skipped, never queued")
	c.window = fs.String("window", "5m", "default window verdicts are computed for")
	c.staleAfter = fs.Duration("stale-after", 30*time.Second, "data older than this is stale: verdicts become UNKNOWN")
	c.scrapeTimeout = fs.Duration("scrape-timeout", 3*time.Second, "deadline of one scrape; a refresh waits no longer for slow targets (they are reported from their last scrape meanwhile), so keep it below --interval")
	c.scrapeSpread = fs.Duration("scrape-spread", 0, "start a refresh's scrapes over this span instead of all at once (each node keeps its place in it), so that a large fleet's parsing does not take every core in one burst; 0, the default, starts them at once, except with --fast-interval: then half of --interval (at most half of --stale-after), so that the fast reads never wait for CPU; set it to change that")
	c.maxSeries = fs.Int("scrape-max-series", engine.DefaultMaxSeries, "refuse a scraped exposition with more series than this (every histogram bucket counts, as in Prometheus); the parse stops there and the node reads UNKNOWN with the limit named")
	c.maxRanks = fs.Int("scrape-max-ranks", engine.DefaultMaxRankValues, "refuse a scraped exposition with more distinct values than this of one rank label (vLLM's engine, SGLang's dp_rank, tp_rank, pp_rank, moe_ep_rank, pid)")
	c.retention = fs.Duration("retention", refresh.DefaultRetention, "how long llmdiag remembers: samples kept for on-demand windows, and a node its source has not presented for this long is forgotten (store, streams, --redis keys)")
	c.maxNodes = fs.Int("max-nodes", refresh.DefaultMaxNodes, "most nodes kept; beyond it new nodes are refused (logged each refresh, counted in llmdiag_nodes_refused_total) while known ones keep refreshing")
	c.historyLen = fs.Int("history", memory.DefaultHistoryLen, "refreshes kept per node for spike-vs-sustained reasoning")
	c.thresholdsFile = fs.String("thresholds", "", "thresholds file (YAML, see llmdiag thresholds); keys it leaves out keep their defaults; --stale-after, when given, overrides its stale_after")
	c.grace = fs.Duration("shutdown-grace", 10*time.Second, "time open requests get to finish on SIGTERM")
	c.sec = securityFlags(fs)
	c.redisURL = fs.String("redis", "", "keep state in this Redis, shared by replicas: redis://[user:password@]host:port[/db] (rediss:// for TLS); several host:port separated by commas for a Cluster. One replica at a time (the ingest lease holder) refreshes; all serve")
	c.redisPasswordFile = fs.String("redis-password-file", "", "file holding the password for --redis (then not in its URL, nor in the process list; read anew for every new connection); the URL's user, if any, goes with it")
	c.redisPrefix = fs.String("redis-prefix", redisstore.DefaultPrefix, "prefix of every Redis key; replicas with the same prefix share state and the ingest lease")
	c.leaseTTL = fs.Duration("lease-ttl", 10*time.Second, "ingest lease period with --redis: the leader renews every third of it; a dead leader is replaced after about this long")
	c.replicaID = fs.String("replica-id", defaultReplicaID(), "this replica's name in the ingest lease (with --redis)")
	c.syncEvery = fs.Duration("redis-sync", time.Second, "with --redis: how often this replica copies the shared state into memory; reads are answered from the copy, so at most about this much behind Redis, and keep being answered (marked degraded) while Redis is down")
	c.fullSyncEvery = fs.Duration("redis-full-sync", replica.DefaultFullEvery, "with --redis: how often this replica reads the whole shared state; the syncs between read only the nodes written since the last one (and the ids of those listed), so this bounds how long a drift could last")
	c.offsetStep = fs.Duration("offset-step", 0, "with --prometheus: finest step on-demand offsets are rounded to, so that nearby offsets share one read (0: --interval); a tenth of the window when larger. Direct scrapes read offsets as asked unless this is set")
	c.requestQueries = fs.Int("max-request-queries", server.DefaultRequestQueryBudget, "queries to --prometheus one request may cause; a request that needs more is refused (resource exhausted)")
	c.mcp = fs.Bool("mcp", true, "serve the MCP server (tools and runbooks for AI agents) over streamable HTTP at /mcp, behind the same authentication; --mcp=false turns it off")
	c.console = fs.Bool("console", true, "serve the web console (the fleet, each node, comparisons; embedded, works offline) at / and its files under /console/; its data comes from the procedures with the token the person enters; --console=false turns it off")
	c.lim = limitFlags(fs)
	c.prom = promFlags(fs)
	c.tls = tlsServeFlags(fs)
	c.alerts = alertFlags(fs) // the Alertmanager receiver, cli/alerts.go
	c.slack = slackFlags(fs)
	c.trace = traceFlags(fs)         // OpenTelemetry, cli/tracing.go
	c.health = healthListenFlags(fs) // grpc.health.v1 in plaintext for probes, cli/healthlisten.go
	c.newLog = logFlags(fs)
	return &ffcli.Command{
		Name:       "serve",
		ShortUsage: "llmdiag serve [--fleet FILE] [--target id=url ...] [flags]",
		ShortHelp:  "run the diagnosis service",
		LongHelp: strings.TrimSpace(`
Scrape every node's /metrics every --interval, diagnose each against its
history and its peers, and serve DiagnosisService over Connect, gRPC and
gRPC-Web on one port, with grpc.health.v1, server reflection (--reflection)
and the service's own /metrics (or on --metrics-listen). With --auth-tokens
every call but health needs a bearer token or a client certificate whose
role grants it (README, Security); a non-loopback --listen needs TLS and
authentication, or --insecure. State is kept in memory, or with --redis in
Redis, shared by any number of replicas: each serves reads, and the one
holding the ingest lease refreshes. Stops gracefully on SIGTERM.`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runServe(ctx, env, c)
		}),
	}
}

// runServe is serve: read the configuration, open the store and the
// source, then refresh and serve until ctx is done.
func runServe(ctx context.Context, env Env, c *serveFlags) error {
	if c.targets.err != nil {
		return usageError{c.targets.err}
	}
	log, err := c.newLog(env.Stderr)
	if err != nil {
		return err
	}
	tlsConfig, err := c.tls.config(log)
	if err != nil {
		return err
	}
	th, f, err := c.configure()
	if err != nil {
		return err
	}
	// Tracing: OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set,
	// else off at no cost (package tracing); spans flushed on exit.
	tr, stopTracing, err := c.trace.setup(ctx, env.Getenv, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		return err
	}
	st, err := c.openStore(ctx, log, reg, tr)
	if err != nil {
		return err
	}
	if st.rdb != nil {
		defer st.rdb.Close()
	}
	src, err := c.openSource(f, log, refresh.SLORetention(th))
	if err != nil {
		return err
	}

	loop := refresh.New(src.src, st.st, tm, log, time.Now, refresh.Config{Interval: *c.interval, Window: *c.window, Thresholds: th, Fleet: src.fleet, Retention: *c.retention, MaxNodes: *c.maxNodes,
		Fast: refresh.FastConfig{Interval: *c.fastInterval, Concurrency: *c.fastConcurrency, Registerer: reg,
			Limits: engine.Limits{MaxSeries: *c.maxSeries, MaxRankValues: *c.maxRanks}}, TracerProvider: tr.Provider})
	if *c.fastInterval > 0 {
		// Nodes known only through Prometheus (no url in the fleet file,
		// or found by discovery) are not read by the fast lane.
		log.Info("fast lane on: nodes with a url in the fleet file are read for routing between refreshes; any other node's routability is as fresh as the refresh, and from Prometheus as Prometheus's scrape",
			"fast_interval", *c.fastInterval, "fast_nodes", loop.FastNodes(), "fleet_nodes", len(src.fleet), "scrape_spread", c.spread())
	}
	if src.scraped > 0 {
		if *c.scrapeTimeout >= loop.Timeout() {
			return usageError{fmt.Errorf("--scrape-timeout %s must be below a refresh's deadline (%s, twice --interval and at least 10s)", *c.scrapeTimeout, loop.Timeout())}
		}
		if *c.scrapeTimeout >= *c.interval {
			log.Warn("--scrape-timeout is not below --interval: a target that hangs delays refreshes by up to --scrape-timeout, so healthy nodes' verdicts can be older than two intervals", "scrape_timeout", *c.scrapeTimeout, "interval", *c.interval)
		}
	}
	svc := server.NewService(st.st, src.src, log, time.Now, server.Config{
		DefaultWindow: *c.window, StaleAfter: *c.staleAfter, Thresholds: th,
		OffsetStep: *c.offsetStep, RequestQueryBudget: *c.requestQueries,
		SLOReads: loop, // the SLO windows its verdicts read
	}, ctx.Done())
	ready := loop.Ready()
	var deps []server.Dependency
	if rdb := st.rdb; rdb != nil {
		ready = sharedReady(ctx, st.st, loop.Ready(), *c.interval)
		deps = append(deps, server.Dependency{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
	}
	surfaces, authorize, err := c.sec.setup(ctx, log, *c.listen, reg, *c.grace)
	if err != nil {
		return err
	}
	// Limits inside authorization: they count by the principal it names.
	lim := server.NewLimiter(c.lim.limits())
	// The surfaces that call svc in process spend their caller's rate limit
	// as RPCs do.
	reads := lim.LimitReads(svc)
	// Runbooks: public, static documentation, one page per cause (runbook/);
	// `llmdiag rules --runbook-base-url` links every alert to them.
	surfaces.Routes = append(surfaces.Routes, server.Route{Pattern: auth.RunbooksPrefix, Handler: runbook.Handler()})
	if *c.mcp {
		// Tool calls are bounded by mcpserver's deadline and in-flight
		// slots, and each read by the caller's rate limit.
		surfaces.Routes = append(surfaces.Routes, server.Route{Pattern: auth.MCPPath,
			Handler: mcpserver.HTTPHandler(mcpServer(reads, &th, mcpserver.Options{Log: log}), log)})
	}
	// The web console: public static files at / and /console/
	// (auth/policy.go); the browser calls the procedures with the
	// person's token, so it reads what that token may read.
	if *c.console {
		ch := console.Handler(console.Options{})
		surfaces.Routes = append(surfaces.Routes,
			server.Route{Pattern: auth.ConsolePath + "{$}", Handler: ch},
			server.Route{Pattern: auth.ConsolePrefix, Handler: ch})
	}
	if route, closeSlack, err := c.slack.route(reads, log); err != nil {
		return err
	} else if route != nil {
		defer closeSlack()
		surfaces.Routes = append(surfaces.Routes, *route)
	}
	// Alertmanager receiver: POST /alertmanager enriches alerts
	// with verdicts and forwards them to the --alert-*-webhook-file sinks
	// (cli/alerts.go); without a sink it answers 404 saying so. Its reads
	// run after the answer, with no caller to charge: svc, not reads; they
	// are bounded by the receiver's queues and per-message limits.
	amRoute, err := c.alerts.route(ctx, svc, log, reg, *c.prom.nodeLabel)
	if err != nil {
		return err
	}
	surfaces.Routes = append(surfaces.Routes, amRoute)
	// A GET of a read may be kept by the caller's cache for one refresh.
	surfaces.GetMaxAge = *c.interval
	health := server.NewHealth(ready, deps...)
	if err := c.health.start(ctx, log, health, *c.grace); err != nil {
		return err
	}
	// The tracing interceptor (none when off) goes first: telemetry's
	// exemplars read the span it starts.
	interceptors, err := tr.Interceptors()
	if err != nil {
		return err
	}
	interceptors = append(interceptors, tm.Interceptor(), lim.Interceptor())
	h := authorize(lim.Wrap(server.NewHandler(svc, health, surfaces, connect.WithInterceptors(interceptors...))))

	ln, err := net.Listen("tcp", *c.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln = server.CapConnections(ln, *c.lim.maxConns)
	ingestCtx, stopIngest := context.WithCancel(ctx)
	defer stopIngest()
	ingestDone := make(chan struct{})
	attrs := []any{"addr", scheme(tlsConfig) + "://" + ln.Addr().String(), "source", src.from, "interval", *c.interval, "window", *c.window}
	if *c.console {
		attrs = append(attrs, "console", scheme(tlsConfig)+"://"+ln.Addr().String()+auth.ConsolePath)
	}
	if st.lease == nil {
		log.Info("llmdiag serving", attrs...)
		go func() { defer close(ingestDone); loop.Run(ingestCtx) }()
	} else {
		log.Info("llmdiag serving", append(attrs, "redis", redact.URL(*c.redisURL), "replica", *c.replicaID, "lease_ttl", *c.leaseTTL)...)
		go func() { defer close(ingestDone); leadRefresh(ingestCtx, st.lease, loop) }()
	}
	go func() {
		select {
		case <-ready:
			log.Info("first refresh done; verdicts available")
		case <-ctx.Done():
		}
	}()
	err = serveMaybeTLS(ctx, ln, h, log, *c.grace, tlsConfig, c.lim.serveOptions())
	stopIngest()
	<-ingestDone // a leader releases the lease before the client closes
	log.Info("llmdiag stopped")
	return err
}

// configure checks the flags against each other and reads the thresholds
// and the fleet: every usage error before anything is opened.
func (c *serveFlags) configure() (diagnose.Thresholds, *fleet.File, error) {
	th, thKeys, err := loadThresholdsKeys(*c.thresholdsFile)
	if err != nil {
		return th, nil, err
	}
	staleGiven := false
	c.fs.Visit(func(f *flag.Flag) { staleGiven = staleGiven || f.Name == "stale-after" })
	if thKeys["stale_after"] && !staleGiven {
		*c.staleAfter = th.StaleAfter
	}
	th.StaleAfter = *c.staleAfter
	if _, _, err := metrics.ParseWindow(*c.window); err != nil {
		return th, nil, usageError{fmt.Errorf("--window: %w", err)}
	}
	if *c.interval <= 0 || *c.staleAfter <= 0 || *c.scrapeTimeout <= 0 || *c.maxSeries <= 0 || *c.maxRanks <= 0 {
		return th, nil, usageError{errors.New("--interval, --stale-after, --scrape-timeout, --scrape-max-series and --scrape-max-ranks must be positive")}
	}
	if *c.fastInterval < 0 || *c.fastConcurrency <= 0 {
		return th, nil, usageError{errors.New("--fast-interval must not be negative and --fast-concurrency must be positive")}
	}
	if *c.fastInterval > 0 && *c.fastInterval >= *c.interval {
		return th, nil, usageError{fmt.Errorf("--fast-interval %s must be below --interval %s (0 turns the fast lane off)", *c.fastInterval, *c.interval)}
	}
	if *c.scrapeSpread < 0 {
		return th, nil, usageError{errors.New("--scrape-spread must not be negative")}
	}
	if *c.offsetStep < 0 || *c.requestQueries <= 0 {
		return th, nil, usageError{errors.New("--offset-step must not be negative and --max-request-queries must be positive")}
	}
	if *c.offsetStep == 0 && *c.prom.url != "" {
		*c.offsetStep = *c.interval
	}
	if m, o := *c.prom.maxInFlight, *c.prom.onDemandInFlight; o < 1 || m <= o {
		return th, nil, usageError{fmt.Errorf("--prometheus-on-demand-in-flight (%d) must be at least 1 and less than --prometheus-max-in-flight (%d), so that refreshes keep slots of their own", o, m)}
	}
	if *c.retention < 2**c.interval || *c.retention < *c.staleAfter {
		return th, nil, usageError{fmt.Errorf("--retention %v must be at least twice --interval (%v) and at least --stale-after (%v)", *c.retention, *c.interval, *c.staleAfter)}
	}
	if err := c.lim.check(); err != nil {
		return th, nil, usageError{err}
	}
	if err := c.alerts.load(); err != nil {
		return th, nil, err
	}
	if *c.maxNodes <= 0 {
		return th, nil, usageError{fmt.Errorf("--max-nodes %d must be positive", *c.maxNodes)}
	}
	if *c.redisPasswordFile != "" && *c.redisURL == "" {
		return th, nil, usageError{errors.New("--redis-password-file without --redis")}
	}
	if *c.redisURL != "" && (*c.leaseTTL < lease.MinTTL || *c.replicaID == "" || *c.syncEvery <= 0 || *c.fullSyncEvery <= 0) {
		return th, nil, usageError{fmt.Errorf("--lease-ttl must be at least %v, --replica-id not empty, --redis-sync and --redis-full-sync positive", lease.MinTTL)}
	}
	f := &fleet.File{}
	if *c.fleetPath != "" {
		if f, err = fleet.Load(*c.fleetPath); err != nil {
			return th, nil, err
		}
	}
	f.Nodes = append(f.Nodes, c.targets.nodes...)
	if err := f.Validate(); err != nil {
		return th, nil, usageError{err}
	}
	if *c.prom.url == "" {
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

// openedStore is the store serve keeps its state in and, with --redis, the
// client (to close and to check) and the ingest lease.
type openedStore struct {
	st    store.Store
	rdb   redis.UniversalClient
	lease *lease.Lease
}

// openStore opens the memory store, or with --redis a replica of the
// shared state (its sync running until ctx is done) and the ingest lease.
func (c *serveFlags) openStore(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, tr *tracing.Tracing) (openedStore, error) {
	if *c.redisURL == "" {
		return openedStore{st: memory.New(memory.Options{HistoryLen: *c.historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))}, nil
	}
	rdb, err := redisstore.NewClientWith(*c.redisURL, redisstore.ClientOptions{PasswordFile: *c.redisPasswordFile})
	if err != nil {
		return openedStore{}, usageError{fmt.Errorf("--redis: %w", err)}
	}
	// go-redis logs through a process-wide logger: route it into ours, at
	// debug level, since the replica and the lease already log a Redis
	// outage once, with what it means.
	redis.SetLogger(redisLogger{log})
	if tr.On() {
		// Commands under a traced refresh or RPC become spans (names only).
		rdb.AddHook(tracing.RedisHook())
	}
	shared := redisstore.New(rdb, redisstore.Options{Prefix: *c.redisPrefix, HistoryLen: *c.historyLen, NodeTTL: *c.retention})
	local := memory.New(memory.Options{HistoryLen: *c.historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))
	rep := replica.New(shared, local, replica.Options{SyncEvery: *c.syncEvery, FullEvery: *c.fullSyncEvery, Log: log})
	go rep.Run(ctx)
	l, err := lease.New(rdb, *c.redisPrefix+"ingest", *c.replicaID, *c.leaseTTL, time.Now, log, reg)
	if err != nil {
		rdb.Close()
		return openedStore{}, err
	}
	return openedStore{st: rep, rdb: rdb, lease: l}, nil
}

// openedSource is where refreshes read: the source, what to call it in the
// log, how many nodes are scraped directly, and the fleet by id.
type openedSource struct {
	src     source.Source
	from    string
	scraped int
	fleet   map[string]fleet.Node
}

// openSource is a direct scrape of the fleet's nodes with a url, or with
// --prometheus Prometheus, combined with the direct scrape of any node
// that has a url. A direct scrape alone keeps samples sloRetention back
// (one a minute beyond --retention) for the SLO windows; with Prometheus
// spread is the span a refresh's scrapes start over (defaultSpread).
func (c *serveFlags) spread() time.Duration {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "scrape-spread" })
	return defaultSpread(set, *c.scrapeSpread, *c.fastInterval, *c.interval, *c.staleAfter)
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

// these are Prometheus's.
func (c *serveFlags) openSource(f *fleet.File, log *slog.Logger, sloRetention time.Duration) (openedSource, error) {
	var scraped []fleet.Node
	for _, n := range f.Nodes {
		if n.URL != "" {
			scraped = append(scraped, n)
		}
	}
	o := openedSource{scraped: len(scraped), fleet: make(map[string]fleet.Node, len(f.Nodes))}
	for _, n := range f.Nodes {
		o.fleet[n.ID] = n
	}
	opts := scrape.Options{Timeout: *c.scrapeTimeout, Retention: *c.retention, StaleAfter: *c.staleAfter, MaxSeries: *c.maxSeries, MaxRankValues: *c.maxRanks, Spread: c.spread()}
	if *c.prom.url == "" {
		opts.LongRetention = sloRetention
	}
	scraper := scrape.New(scraped, nil, log, time.Now, opts)
	if *c.prom.url == "" {
		o.src, o.from = scraper, fmt.Sprintf("direct scrape of %d nodes", len(scraped))
		return o, nil
	}
	ps, err := prom.New(c.prom.config(*c.staleAfter), log, time.Now)
	if err != nil {
		return o, usageError{fmt.Errorf("--prometheus: %w", err)}
	}
	o.src, o.from = ps, "prometheus "+redact.URL(*c.prom.url)
	if len(scraped) > 0 {
		// Fleet nodes with a url: gauges fresh from their endpoints,
		// everything else from Prometheus.
		o.src = combine.Combined{History: ps, Gauges: scraper}
		o.from += fmt.Sprintf(" with gauges scraped from %d nodes", len(scraped))
	}
	return o, nil
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

type promFlagSet struct {
	url, bearer, user, password, ca, cert, key, serverName, nodeLabel, modelLabels, dcgmJoin *string
	insecure                                                                                 *bool
	timeout                                                                                  *time.Duration
	maxInFlight, onDemandInFlight                                                            *int
	headers                                                                                  headersFlag
}

func promFlags(fs *flag.FlagSet) promFlagSet {
	p := promFlagSet{headers: headersFlag{}}
	p.url = fs.String("prometheus", "", "read the fleet from this Prometheus (or Thanos, Mimir, VictoriaMetrics) instead of scraping it")
	p.bearer = fs.String("prometheus-bearer-token-file", "", "file holding a bearer token for --prometheus (re-read on every request)")
	p.user = fs.String("prometheus-basic-auth-user", "", "basic-auth user for --prometheus")
	p.password = fs.String("prometheus-basic-auth-password-file", "", "file holding the basic-auth password for --prometheus")
	fs.Var(p.headers, "prometheus-header", "extra request header for --prometheus, as \"Name: value\"; repeatable")
	p.ca = fs.String("prometheus-ca-file", "", "CA certificate to verify --prometheus with")
	p.cert = fs.String("prometheus-cert-file", "", "client certificate for --prometheus")
	p.key = fs.String("prometheus-key-file", "", "client key for --prometheus")
	p.serverName = fs.String("prometheus-server-name", "", "server name to verify --prometheus's certificate against")
	p.insecure = fs.Bool("prometheus-insecure-skip-verify", false, "do not verify --prometheus's certificate (testing only)")
	p.timeout = fs.Duration("prometheus-timeout", 10*time.Second, "deadline of one query to --prometheus")
	p.maxInFlight = fs.Int("prometheus-max-in-flight", 12, "queries to --prometheus in flight at once, refreshes and on-demand windows together")
	p.onDemandInFlight = fs.Int("prometheus-on-demand-in-flight", 4, "of --prometheus-max-in-flight, the most on-demand windows, offsets and baselines may use; the rest are the refresh's own")
	p.nodeLabel = fs.String("node-label", "instance", "label that identifies a node in --prometheus")
	p.modelLabels = fs.String("model-label", "model_name,model,name", "labels that may carry the served model, in order of preference")
	p.dcgmJoin = fs.String("prometheus-dcgm-join", "", "read the NVIDIA DCGM exporter's GPU series from --prometheus and join them to nodes by these labels, tried in order (e.g. Hostname,pod,instance); empty: no GPU figures")
	return p
}

func (p promFlagSet) config(staleAfter time.Duration) prom.Config {
	cfg := prom.Config{
		URL:                   *p.url,
		BearerTokenFile:       *p.bearer,
		BasicAuthUser:         *p.user,
		BasicAuthPasswordFile: *p.password,
		Headers:               p.headers,
		TLS: prom.TLSConfig{
			CAFile: *p.ca, CertFile: *p.cert, KeyFile: *p.key,
			ServerName: *p.serverName, InsecureSkipVerify: *p.insecure,
		},
		Timeout:          *p.timeout,
		MaxInFlight:      *p.maxInFlight,
		OnDemandInFlight: *p.onDemandInFlight,
		NodeLabel:        *p.nodeLabel,
		StaleAfter:       staleAfter,
	}
	for _, l := range strings.Split(*p.modelLabels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			cfg.ModelLabels = append(cfg.ModelLabels, l)
		}
	}
	for _, l := range strings.Split(*p.dcgmJoin, ",") {
		if l = strings.TrimSpace(l); l != "" {
			cfg.DCGMJoin = append(cfg.DCGMJoin, l)
		}
	}
	return cfg
}

// leadRefresh runs loop whenever this replica holds the ingest lease, until
// ctx is done: each term's refreshes carry the term's fencing epoch, so the
// store refuses them once a newer leader has written, and the loop stops
// when the term ends (lost, not renewed in time, or shutdown).
func leadRefresh(ctx context.Context, l *lease.Lease, loop *refresh.Loop) {
	l.Run(ctx, func(leaderCtx context.Context, epoch uint64) {
		loop.Run(store.WithFence(leaderCtx, epoch))
	})
}

// sharedReady is closed when this replica's own first refresh is done or
// the shared store already holds verdicts another replica wrote, whichever
// comes first: a follower serves reads without refreshing itself.
func sharedReady(ctx context.Context, st store.Store, own <-chan struct{}, every time.Duration) <-chan struct{} {
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			lctx, cancel := context.WithTimeout(ctx, every)
			recs, err := st.List(lctx)
			cancel()
			if err == nil && len(recs) > 0 {
				return
			}
			select {
			case <-own:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ready
}

// redisLogger passes go-redis's own log lines to slog.
type redisLogger struct{ log *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// defaultReplicaID is hostname-pid.
func defaultReplicaID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "llmdiag"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}
