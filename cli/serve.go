package cli

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/console"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/lease"
	"github.com/llmdiag/llmdiag/mcpserver"
	"github.com/llmdiag/llmdiag/readygate"
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

// serveEnvHelp ends serve's help: how flags map to the environment.
const serveEnvHelp = `

Every flag can also be set in the environment as LLMDIAG_ plus its name in
capitals with - as _ (LLMDIAG_LISTEN, LLMDIAG_REDIS_PASSWORD_FILE,
LLMDIAG_TLS_CERT, …); a flag given on the command line wins. Tracing is
configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT
turns it on).`

func serveCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag serve", flag.ContinueOnError)
	c := &serveConfig{}
	c.register(fs)
	return &ffcli.Command{
		Name:       "serve",
		ShortUsage: "llmdiag serve [--fleet FILE] [--target id=url ...] [--discovery FILE] [flags]",
		ShortHelp:  "run the diagnosis service",
		LongHelp: strings.TrimSpace(`
Scrape every node's /metrics every --interval, diagnose each against its
history and its peers, and serve DiagnosisService over Connect, gRPC and
gRPC-Web on one port, with grpc.health.v1, server reflection (--reflection)
and the service's own /metrics (or on --metrics-listen). With --auth-tokens
every call but health needs a bearer token or a client certificate whose
role grants it (docs/security.md); a non-loopback --listen needs TLS and
authentication, or --insecure. State is kept in memory, or with --redis in
Redis, shared by any number of replicas: each serves reads, and the one
holding the ingest lease refreshes. Stops gracefully on SIGTERM.

The nodes are the fleet file's (--fleet) and --target's, or those
Prometheus's own service discovery finds (--discovery FILE: the
scrape_configs a Prometheus would scrape them with, Kubernetes pods
included): then a node that appears is scraped from the next refresh, and
one that goes away is removed at the next refresh, with a final removed
event on StreamHealth; a discovery that fails keeps its last targets.`) + serveEnvHelp,
		FlagSet: fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			c.setGiven(fs)
			return runServe(ctx, env, c)
		}),
	}
}

// runServe is serve: each step starts one part, from the configuration to
// the port; the last serves until ctx is done, and what the steps opened is
// closed in reverse when it returns.
func runServe(ctx context.Context, env Env, c *serveConfig) error {
	s := &serving{cfg: c, env: env}
	defer s.close()
	for _, step := range []func(context.Context) error{
		s.logger,
		s.configuration,
		s.tls,
		s.tracing,
		s.telemetry,
		s.store,
		s.source,
		s.discovery,
		s.refreshLoop,
		s.service,
		s.security,
		s.limits,
		s.runbooks,
		s.mcp,
		s.console,
		s.routable,
		s.haproxyAgent,
		s.readinessGate,
		s.slack,
		s.alerts,
		s.health,
		s.listener,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return s.serve(ctx)
}

// serving is what runServe's steps have started so far.
type serving struct {
	cfg *serveConfig
	env Env
	// closers run in reverse when serve ends.
	closers []func()

	log       *slog.Logger
	tlsConfig *tls.Config
	th        diagnose.Thresholds
	fleet     *fleet.File
	tr        *tracing.Tracing
	reg       *prometheus.Registry
	tm        *telemetry.Metrics
	refusals  *refusal.Log
	st        openedStore
	src       openedSource
	disco     *fleetsd.Discovery // --discovery (cli/discovery.go), else nil
	sdFile    *fleetsd.File      // --discovery's file, else nil
	gate      *readygate.Gate    // --readiness-gate (cli/readinessgate.go), else nil
	loop      *refresh.Loop
	svc       *server.Service
	ready     <-chan struct{}
	deps      []server.Dependency
	surfaces  server.Surfaces
	authorize func(http.Handler) http.Handler
	lim       *server.Limiter
	// reads is svc behind the caller's rate limit: the surfaces that call
	// svc in process spend it as RPCs do.
	reads  server.Reads
	checks grpchealth.Checker
	ln     net.Listener
	h      http.Handler
}

func (s *serving) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// logger is --log-level and --log-format's logger on standard error.
func (s *serving) logger(context.Context) (err error) {
	s.log, err = s.cfg.log.logger(s.env.Stderr)
	return err
}

// configuration checks the flags and reads the thresholds and the fleet.
func (s *serving) configuration(context.Context) (err error) {
	s.th, s.fleet, err = s.cfg.configure()
	return err
}

// tls is the port's TLS configuration, nil for plaintext.
func (s *serving) tls(context.Context) (err error) {
	s.tlsConfig, err = s.cfg.tls.config(s.log)
	return err
}

// tracing is OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else off at no
// cost (package tracing); spans are flushed on exit.
func (s *serving) tracing(ctx context.Context) error {
	tr, stop, err := s.cfg.trace.setup(ctx, s.env.Getenv, s.log)
	if err != nil {
		return err
	}
	s.tr = tr
	s.closers = append(s.closers, stop)
	return nil
}

// telemetry is the service's own metrics, with the Go runtime's and the
// process's, and the refusals' counter and bounded log.
func (s *serving) telemetry(context.Context) (err error) {
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.tm, err = telemetry.New(s.reg, time.Now); err != nil {
		return err
	}
	s.refusals, err = refusal.New(refusal.Options{Log: s.log, Registerer: s.reg})
	return err
}

// store opens the memory store, or the replica of the shared state in
// --redis.
func (s *serving) store(ctx context.Context) (err error) {
	s.st, err = s.cfg.openStore(ctx, s.log, s.reg, s.tr)
	if err != nil {
		return err
	}
	if rdb := s.st.rdb; rdb != nil {
		s.closers = append(s.closers, func() { rdb.Close() })
	}
	return nil
}

// source opens where refreshes read.
func (s *serving) source(context.Context) (err error) {
	s.src, err = s.cfg.openSource(s.fleet, s.log, refresh.SLORetention(s.th))
	if s.src.close != nil {
		s.closers = append(s.closers, s.src.close)
	}
	return err
}

// refreshLoop builds the loop that refreshes the fleet (and the fast lane)
// and checks --scrape-timeout against its deadline.
func (s *serving) refreshLoop(context.Context) error {
	c := s.cfg
	s.loop = refresh.New(s.src.src, s.st.st, s.tm, s.log, time.Now, refresh.Config{
		Interval: c.interval, Window: c.window, Thresholds: s.th, Fleet: s.src.fleet, Retention: c.retention, MaxNodes: c.maxNodes,
		// Reading Prometheus, --discovery decides which series are nodes.
		FleetOnly: c.discoveryPath != "" && c.prom.url != "",
		Fast: refresh.FastConfig{Interval: c.fastInterval, Concurrency: c.fastConcurrency, Registerer: s.reg,
			Limits: engine.Limits{MaxSeries: c.maxSeries, MaxRankValues: c.maxRanks}},
		TracerProvider: s.tr.Provider,
	})
	if c.fastInterval > 0 {
		// Nodes known only through Prometheus (no url in the fleet file,
		// or found by Prometheus's own discovery) are not read by the fast
		// lane; --discovery's nodes are, as they come and go.
		s.log.Info("fast lane on: nodes with a url in the fleet (the fleet file's, --target's or --discovery's) are read for routing between refreshes; any other node's routability is as fresh as the refresh, and from Prometheus as Prometheus's scrape",
			"fast_interval", c.fastInterval, "fast_nodes", s.loop.FastNodes(), "fleet_nodes", len(s.src.fleet), "scrape_spread", c.spread())
	}
	if s.src.scraped > 0 || s.disco != nil {
		if c.scrapeTimeout >= s.loop.Timeout() {
			return usageError{fmt.Errorf("--scrape-timeout %s must be below a refresh's deadline (%s, twice --interval and at least 10s)", c.scrapeTimeout, s.loop.Timeout())}
		}
		if c.scrapeTimeout >= c.interval {
			s.log.Warn("--scrape-timeout is not below --interval: a target that hangs delays refreshes by up to --scrape-timeout, so healthy nodes' verdicts can be older than two intervals", "scrape_timeout", c.scrapeTimeout, "interval", c.interval)
		}
	}
	return nil
}

// service is DiagnosisService over the store, and when it is ready: after
// this replica's first refresh or, with --redis, once the shared store
// holds verdicts.
func (s *serving) service(ctx context.Context) error {
	c := s.cfg
	s.ready = s.loop.Ready()
	if rdb := s.st.rdb; rdb != nil {
		s.ready = sharedReady(ctx, s.st.st, s.loop.Ready(), c.interval)
		s.deps = append(s.deps, server.Dependency{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
	}
	s.svc = server.NewService(s.st.st, s.src.src, s.log, time.Now, server.Config{
		DefaultWindow: c.window, StaleAfter: c.staleAfter, Thresholds: s.th,
		OffsetStep: c.offsetStep, RequestQueryBudget: c.requestQueries,
		SLOReads: s.loop, // the SLO windows its verdicts read
		Routable: s.routableFallback(),
	}, ctx.Done())
	return nil
}

// routableFallback is the fallback of the routability answers (GetRoutability,
// GET /routable/{node}): --routable-fail-open, and no unknown node before
// the service holds verdicts.
func (s *serving) routableFallback() server.RoutableFallback {
	return server.RoutableFallback{FailOpen: s.cfg.routableFailOpen, Ready: s.ready}
}

// security is authentication and authorization, the port's optional
// surfaces and --metrics-listen.
func (s *serving) security(ctx context.Context) (err error) {
	s.surfaces, s.authorize, err = s.cfg.sec.setup(ctx, s.log, s.cfg.listen, s.cfg.tls, s.reg, s.cfg.grace, s.refusals)
	return err
}

// limits bound what each caller may hold and ask; they sit inside
// authorization, and count by the principal it names.
func (s *serving) limits(context.Context) error {
	lim := s.cfg.lim.limits()
	lim.Refusals = s.refusals
	s.lim = server.NewLimiter(lim)
	s.reads = s.lim.LimitReads(s.svc)
	return nil
}

// runbooks are public, static documentation, one page per cause
// (runbook/); `llmdiag rules --runbook-base-url` links every alert to them.
func (s *serving) runbooks(context.Context) error {
	s.route(server.Route{Pattern: auth.RunbooksPrefix, Handler: runbook.Handler()})
	return nil
}

// mcp is the MCP server at /mcp unless --mcp=false. Tool calls are bounded
// by mcpserver's deadline and in-flight slots, and each read by the
// caller's rate limit.
func (s *serving) mcp(context.Context) error {
	if s.cfg.mcp {
		s.route(server.Route{Pattern: auth.MCPPath,
			Handler: mcpserver.HTTPHandler(mcpServer(s.reads, &s.th, mcpserver.Options{Log: s.log}), s.log)})
	}
	return nil
}

// console is the web console unless --console=false: public static files
// at / and /console/ (auth/policy.go); the browser calls the procedures
// with the person's token, so it reads what that token may read.
func (s *serving) console(context.Context) error {
	if s.cfg.console {
		ch := console.Handler(console.Options{})
		s.route(server.Route{Pattern: auth.ConsolePath + "{$}", Handler: ch}, server.Route{Pattern: auth.ConsolePrefix, Handler: ch})
	}
	return nil
}

// routable is GET /routable/{node}, the router role's check of one node
// for proxies' health checkers: a store lookup per request, not charged to
// the caller's rate limit (each proxy checks every node every few seconds),
// with --routable-fail-open deciding what stale data answers.
func (s *serving) routable(context.Context) error {
	h, err := s.svc.RoutableHandler(server.RoutableOptions{RoutableFallback: s.routableFallback(), Registerer: s.reg})
	if err != nil {
		return err
	}
	s.route(server.Route{Pattern: server.RoutablePattern, Handler: h})
	return nil
}

// haproxyAgent answers HAProxy's agent check with
// --haproxy-agent-listen, on an address of its own: the verdicts as
// HAProxy's weights and states, from a store lookup per check.
func (s *serving) haproxyAgent(ctx context.Context) error {
	wait, err := s.cfg.haproxy.start(ctx, s.log, s.svc, s.reg)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, wait)
	return nil
}

// slack answers Slack's slash command with --slack-signing-secret-file.
func (s *serving) slack(context.Context) error {
	route, closeSlack, err := s.cfg.slack.route(s.reads, s.log)
	if err != nil || route == nil {
		return err
	}
	s.closers = append(s.closers, closeSlack)
	s.route(*route)
	return nil
}

// alerts is the Alertmanager receiver: POST /alertmanager enriches alerts
// with verdicts and forwards them to the --alert-*-webhook-file sinks
// (cli/alerts.go); without a sink it answers 404 saying so. Its reads run
// after the answer, with no caller to charge: svc, not reads; they are
// bounded by the receiver's queues and per-message limits.
func (s *serving) alerts(ctx context.Context) error {
	route, err := s.cfg.alerts.route(ctx, s.svc, s.log, s.reg, s.cfg.prom.nodeLabel)
	if err != nil {
		return err
	}
	s.route(route)
	return nil
}

// health is grpc.health.v1's checker, served on the port and, with
// --health-listen, alone on an address of its own.
func (s *serving) health(ctx context.Context) error {
	s.checks = server.NewHealth(s.ready, s.deps...)
	return s.cfg.health.start(ctx, s.log, s.checks, s.cfg.grace, s.refusals)
}

// listener is the port and its handler: the procedures and surfaces behind
// tracing, telemetry, limits and authorization.
func (s *serving) listener(context.Context) error {
	// A GET of a read may be kept by the caller's cache for one refresh.
	s.surfaces.GetMaxAge = s.cfg.interval
	// The tracing interceptor (none when off) goes first: telemetry's
	// exemplars read the span it starts.
	interceptors, err := s.tr.Interceptors()
	if err != nil {
		return err
	}
	interceptors = append(interceptors, s.tm.Interceptor(), s.lim.Interceptor())
	// REST paths are transcoded into Connect calls of the handler behind
	// authorization, which then treat them as any other call.
	s.h, err = server.REST(s.authorize(s.lim.Wrap(server.NewHandler(s.svc, s.checks, s.surfaces, connect.WithInterceptors(interceptors...)))))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	conns := s.cfg.lim.connLimits()
	conns.Refusals = s.refusals
	s.ln = server.LimitConnections(ln, conns)
	return nil
}

// serve refreshes (with --redis, while this replica holds the ingest
// lease) and serves until ctx is done, then stops refreshing.
func (s *serving) serve(ctx context.Context) error {
	c := s.cfg
	ingestCtx, stopIngest := context.WithCancel(ctx)
	defer stopIngest()
	ingestDone := make(chan struct{})
	url := scheme(s.tlsConfig) + "://" + s.ln.Addr().String()
	attrs := []any{"addr", url, "source", s.src.from, "interval", c.interval, "window", c.window.String()}
	if c.console {
		attrs = append(attrs, "console", url+auth.ConsolePath)
	}
	// With --discovery, the first refresh waits for its first node set.
	wait := func() {}
	if s.disco != nil {
		first, done := s.runDiscovery(ingestCtx)
		defer func() { <-done }() // after stopIngest, below
		wait = func() { s.waitDiscovery(ingestCtx, first) }
	}
	if s.st.lease == nil {
		s.log.Info("llmdiag serving", attrs...)
		go func() { defer close(ingestDone); wait(); s.loop.Run(ingestCtx) }()
	} else {
		s.log.Info("llmdiag serving", append(attrs, "redis", redact.URL(c.redis.url), "replica", c.redis.replicaID, "lease_ttl", c.redis.leaseTTL)...)
		go func() { defer close(ingestDone); wait(); leadRefresh(ingestCtx, s.st.lease, s.loop) }()
	}
	go func() {
		select {
		case <-s.ready:
			s.log.Info("first refresh done; verdicts available")
		case <-ctx.Done():
		}
	}()
	gateDone := s.runGate(ctx)
	opts := c.lim.serveOptions()
	opts.Refusals = s.refusals
	err := serveMaybeTLS(ctx, s.ln, s.h, s.log, c.grace, s.tlsConfig, opts)
	<-gateDone // the gate has failed open and released its Lease
	stopIngest()
	<-ingestDone // a leader releases the lease before the client closes
	s.log.Info("llmdiag stopped")
	return err
}

// route adds routes to the port's surfaces.
func (s *serving) route(routes ...server.Route) {
	s.surfaces.Routes = append(s.surfaces.Routes, routes...)
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
func (c *serveConfig) openStore(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, tr *tracing.Tracing) (openedStore, error) {
	if c.redis.url == "" {
		return openedStore{st: memory.New(memory.Options{HistoryLen: c.historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))}, nil
	}
	rdb, err := redisstore.NewClientWith(c.redis.url, redisstore.ClientOptions{PasswordFile: c.redis.passwordFile})
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
	shared := redisstore.New(rdb, redisstore.Options{Prefix: c.redis.prefix, HistoryLen: c.historyLen, NodeTTL: c.retention})
	local := memory.New(memory.Options{HistoryLen: c.historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))
	rep := replica.New(shared, local, replica.Options{SyncEvery: c.redis.syncEvery, FullEvery: c.redis.fullSyncEvery, Log: log})
	go rep.Run(ctx)
	l, err := lease.New(rdb, c.redis.prefix+"ingest", c.redis.replicaID, c.redis.leaseTTL, time.Now, log, reg)
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
	// scraper is the direct scrape, whose targets --discovery changes;
	// nil when nothing is scraped directly.
	scraper *scrape.Scraper
	// close stops what the source runs in the background; nil when none.
	close func()
}

// openSource is a direct scrape of the fleet's nodes with a url, or with
// --prometheus Prometheus, combined with the direct scrape of any node
// that has a url. A direct scrape keeps every sample of --window (5m at
// least) and two intervals, one a minute beyond, --retention back, or sloRetention back for
// the SLO windows when alone; with Prometheus these are Prometheus's.
func (c *serveConfig) openSource(f *fleet.File, log *slog.Logger, sloRetention time.Duration) (openedSource, error) {
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
	opts := scrape.Options{Timeout: c.scrapeTimeout, Retention: c.retention, StaleAfter: c.staleAfter, MaxSeries: c.maxSeries, MaxRankValues: c.maxRanks, Spread: c.spread(),
		FullResolution: scrape.FullResolution(c.window, c.interval)}
	if c.prom.url == "" {
		opts.LongRetention = sloRetention
	}
	scraper := scrape.New(scraped, nil, log, time.Now, opts)
	if c.prom.url == "" {
		o.src, o.from, o.scraper = scraper, fmt.Sprintf("direct scrape of %d nodes", len(scraped)), scraper
		if c.discoveryPath != "" {
			o.from = "direct scrape of the nodes --discovery finds"
		}
		return o, nil
	}
	pcfg := c.prom.config(c.staleAfter)
	// A fleet node's pod label picks its GPUs among the DCGM series
	// joined to it (engine.NodePod).
	for _, n := range f.Nodes {
		if p := engine.NodePod(n.Labels); p.Pod != "" {
			if pcfg.DCGMPods == nil {
				pcfg.DCGMPods = map[string]engine.DCGMPod{}
			}
			pcfg.DCGMPods[n.ID] = p
		}
	}
	ps, err := prom.New(pcfg, log, time.Now)
	if err != nil {
		return o, usageError{fmt.Errorf("--prometheus: %w", err)}
	}
	o.src, o.from = ps, "prometheus "+redact.URL(c.prom.url)
	switch {
	case c.discoveryPath != "":
		// Discovered nodes with a url, as fleet nodes with one.
		o.combine(ps, scraper, c.interval)
		o.from += " with gauges scraped from the nodes --discovery finds"
	case len(scraped) > 0:
		// Fleet nodes with a url: gauges fresh from their endpoints,
		// everything else from Prometheus.
		o.combine(ps, scraper, c.interval)
		o.from += fmt.Sprintf(" with gauges scraped from %d nodes", len(scraped))
	}
	return o, nil
}

// combine makes o's source Prometheus's history joined with scraper's
// gauges. A refresh waits for Prometheus at most half an interval after
// the scrapes answered: a healthy Prometheus answers its few queries well
// within that, and a refresh then still fits in its interval beside
// scrapes that take less than the other half, so a slow or hung
// Prometheus delays the scraped nodes by half an interval at most rather
// than holding them back until its deadline. Its rates and percentiles
// meanwhile are its last answer's, with a warning.
func (o *openedSource) combine(ps source.Source, scraper *scrape.Scraper, interval time.Duration) {
	wait := max(interval/2, time.Nanosecond) // 0 would wait without bound
	cs := combine.New(ps, scraper, combine.Options{Wait: wait, Now: time.Now})
	o.src, o.scraper, o.close = cs, scraper, cs.Close
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
