package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
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

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/lease"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
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

func serveCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve Connect, gRPC, gRPC-Web, health, reflection and /metrics on")
	fleetPath := fs.String("fleet", "", "fleet file (YAML): nodes with id, url, model, engine and profile")
	var targets targetsFlag
	fs.Var(&targets, "target", "a node to scrape, as id=url[,model=NAME][,engine=vllm|sglang][,follow_redirects=true]; repeatable, adds to --fleet")
	interval := fs.Duration("interval", 5*time.Second, "time between refreshes of the whole fleet")
	window := fs.String("window", "5m", "default window verdicts are computed for")
	staleAfter := fs.Duration("stale-after", 30*time.Second, "data older than this is stale: verdicts become UNKNOWN")
	scrapeTimeout := fs.Duration("scrape-timeout", 3*time.Second, "deadline of one scrape; a refresh waits no longer for slow targets (they are reported from their last scrape meanwhile), so keep it below --interval")
	maxSeries := fs.Int("scrape-max-series", engine.DefaultMaxSeries, "refuse a scraped exposition with more series than this (every histogram bucket counts, as in Prometheus); the parse stops there and the node reads UNKNOWN with the limit named")
	maxRanks := fs.Int("scrape-max-ranks", engine.DefaultMaxRankValues, "refuse a scraped exposition with more distinct values than this of one rank label (vLLM's engine, SGLang's dp_rank, tp_rank, pp_rank, moe_ep_rank, pid)")
	retention := fs.Duration("retention", refresh.DefaultRetention, "how long llmdiag remembers: samples kept for on-demand windows, and a node its source has not presented for this long is forgotten (store, streams, --redis keys)")
	maxNodes := fs.Int("max-nodes", refresh.DefaultMaxNodes, "most nodes kept; beyond it new nodes are refused (logged each refresh, counted in llmdiag_nodes_refused_total) while known ones keep refreshing")
	historyLen := fs.Int("history", memory.DefaultHistoryLen, "refreshes kept per node for spike-vs-sustained reasoning")
	thresholdsFile := fs.String("thresholds", "", "thresholds file (YAML, see llmdiag thresholds); keys it leaves out keep their defaults; --stale-after, when given, overrides its stale_after")
	grace := fs.Duration("shutdown-grace", 10*time.Second, "time open requests get to finish on SIGTERM")
	sf := securityFlags(fs)
	redisURL := fs.String("redis", "", "keep state in this Redis, shared by replicas: redis://[user:password@]host:port[/db] (rediss:// for TLS); several host:port separated by commas for a Cluster. One replica at a time (the ingest lease holder) refreshes; all serve")
	redisPasswordFile := fs.String("redis-password-file", "", "file holding the password for --redis (then not in its URL, nor in the process list; read anew for every new connection); the URL's user, if any, goes with it")
	redisPrefix := fs.String("redis-prefix", redisstore.DefaultPrefix, "prefix of every Redis key; replicas with the same prefix share state and the ingest lease")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "ingest lease period with --redis: the leader renews every third of it; a dead leader is replaced after about this long")
	replicaID := fs.String("replica-id", defaultReplicaID(), "this replica's name in the ingest lease (with --redis)")
	syncEvery := fs.Duration("redis-sync", time.Second, "with --redis: how often this replica copies the shared state into memory; reads are answered from the copy, so at most about this much behind Redis, and keep being answered (marked degraded) while Redis is down")
	offsetStep := fs.Duration("offset-step", 0, "with --prometheus: finest step on-demand offsets are rounded to, so that nearby offsets share one read (0: --interval); a tenth of the window when larger. Direct scrapes read offsets as asked unless this is set")
	requestQueries := fs.Int("max-request-queries", server.DefaultRequestQueryBudget, "queries to --prometheus one request may cause; a request that needs more is refused (resource exhausted)")
	lf := limitFlags(fs)
	pf := promFlags(fs)
	tf := tlsServeFlags(fs)
	newLog := logFlags(fs)
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
			if targets.err != nil {
				return usageError{targets.err}
			}
			log, err := newLog(env.Stderr)
			if err != nil {
				return err
			}
			tlsConfig, err := tf.config(log)
			if err != nil {
				return err
			}
			th, thKeys, err := loadThresholdsKeys(*thresholdsFile)
			if err != nil {
				return err
			}
			staleGiven := false
			fs.Visit(func(f *flag.Flag) { staleGiven = staleGiven || f.Name == "stale-after" })
			if thKeys["stale_after"] && !staleGiven {
				*staleAfter = th.StaleAfter
			}
			if _, _, err := metrics.ParseWindow(*window); err != nil {
				return usageError{fmt.Errorf("--window: %w", err)}
			}
			if *interval <= 0 || *staleAfter <= 0 || *scrapeTimeout <= 0 || *maxSeries <= 0 || *maxRanks <= 0 {
				return usageError{errors.New("--interval, --stale-after, --scrape-timeout, --scrape-max-series and --scrape-max-ranks must be positive")}
			}
			if *offsetStep < 0 || *requestQueries <= 0 {
				return usageError{errors.New("--offset-step must not be negative and --max-request-queries must be positive")}
			}
			if *offsetStep == 0 && *pf.url != "" {
				*offsetStep = *interval
			}
			if m, o := *pf.maxInFlight, *pf.onDemandInFlight; o < 1 || m <= o {
				return usageError{fmt.Errorf("--prometheus-on-demand-in-flight (%d) must be at least 1 and less than --prometheus-max-in-flight (%d), so that refreshes keep slots of their own", o, m)}
			}
			if *retention < 2**interval || *retention < *staleAfter {
				return usageError{fmt.Errorf("--retention %v must be at least twice --interval (%v) and at least --stale-after (%v)", *retention, *interval, *staleAfter)}
			}
			if err := lf.check(); err != nil {
				return usageError{err}
			}
			if *maxNodes <= 0 {
				return usageError{fmt.Errorf("--max-nodes %d must be positive", *maxNodes)}
			}
			if *redisPasswordFile != "" && *redisURL == "" {
				return usageError{errors.New("--redis-password-file without --redis")}
			}
			if *redisURL != "" && (*leaseTTL < lease.MinTTL || *replicaID == "" || *syncEvery <= 0) {
				return usageError{fmt.Errorf("--lease-ttl must be at least %v, --replica-id not empty and --redis-sync positive", lease.MinTTL)}
			}
			f := &fleet.File{}
			if *fleetPath != "" {
				if f, err = fleet.Load(*fleetPath); err != nil {
					return err
				}
			}
			f.Nodes = append(f.Nodes, targets.nodes...)
			if err := f.Validate(); err != nil {
				return usageError{err}
			}
			if *pf.url == "" {
				if len(f.Nodes) == 0 {
					return usageError{errors.New("no nodes to watch: give --prometheus URL, --fleet FILE or --target id=url")}
				}
				for _, n := range f.Nodes {
					if n.URL == "" {
						return usageError{fmt.Errorf("node %q has no url to scrape (or read the fleet from --prometheus)", n.ID)}
					}
				}
			}

			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			tm, err := telemetry.New(reg, time.Now)
			if err != nil {
				return err
			}
			th.StaleAfter = *staleAfter
			var (
				st          store.Store
				rdb         redis.UniversalClient
				ingestLease *lease.Lease
			)
			if *redisURL == "" {
				st = memory.New(memory.Options{HistoryLen: *historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))
			} else {
				if rdb, err = redisstore.NewClientWith(*redisURL, redisstore.ClientOptions{PasswordFile: *redisPasswordFile}); err != nil {
					return usageError{fmt.Errorf("--redis: %w", err)}
				}
				defer rdb.Close()
				// go-redis logs through a process-wide logger: route it into
				// ours, at debug level, since the replica and the lease already
				// log a Redis outage once, with what it means.
				redis.SetLogger(redisLogger{log})
				shared := redisstore.New(rdb, redisstore.Options{Prefix: *redisPrefix, HistoryLen: *historyLen, NodeTTL: *retention})
				local := memory.New(memory.Options{HistoryLen: *historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))
				rep := replica.New(shared, local, replica.Options{SyncEvery: *syncEvery, Log: log})
				go rep.Run(ctx)
				st = rep
				if ingestLease, err = lease.New(rdb, *redisPrefix+"ingest", *replicaID, *leaseTTL, time.Now, log, reg); err != nil {
					return err
				}
			}
			var (
				src  source.Source
				from string
			)
			var scraped []fleet.Node
			for _, n := range f.Nodes {
				if n.URL != "" {
					scraped = append(scraped, n)
				}
			}
			scraper := scrape.New(scraped, nil, log, time.Now, scrape.Options{Timeout: *scrapeTimeout, Retention: *retention, StaleAfter: *staleAfter, MaxSeries: *maxSeries, MaxRankValues: *maxRanks})
			switch {
			case *pf.url == "":
				src, from = scraper, fmt.Sprintf("direct scrape of %d nodes", len(scraped))
			default:
				ps, err := prom.New(pf.config(*staleAfter), log, time.Now)
				if err != nil {
					return usageError{fmt.Errorf("--prometheus: %w", err)}
				}
				src, from = ps, "prometheus "+redact.URL(*pf.url)
				if len(scraped) > 0 {
					// Fleet nodes with a url: gauges fresh from their
					// endpoints, everything else from Prometheus.
					src = combine.Combined{History: ps, Gauges: scraper}
					from += fmt.Sprintf(" with gauges scraped from %d nodes", len(scraped))
				}
			}
			byID := make(map[string]fleet.Node, len(f.Nodes))
			for _, n := range f.Nodes {
				byID[n.ID] = n
			}
			loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Interval: *interval, Window: *window, Thresholds: th, Fleet: byID, Retention: *retention, MaxNodes: *maxNodes})
			if len(scraped) > 0 {
				if *scrapeTimeout >= loop.Timeout() {
					return usageError{fmt.Errorf("--scrape-timeout %s must be below a refresh's deadline (%s, twice --interval and at least 10s)", *scrapeTimeout, loop.Timeout())}
				}
				if *scrapeTimeout >= *interval {
					log.Warn("--scrape-timeout is not below --interval: a target that hangs delays refreshes by up to --scrape-timeout, so healthy nodes' verdicts can be older than two intervals", "scrape_timeout", *scrapeTimeout, "interval", *interval)
				}
			}
			svc := server.NewService(st, src, log, time.Now, server.Config{
				DefaultWindow: *window, StaleAfter: *staleAfter, Thresholds: th,
				OffsetStep: *offsetStep, RequestQueryBudget: *requestQueries,
			}, ctx.Done())
			ready := loop.Ready()
			var deps []server.Dependency
			if rdb != nil {
				ready = sharedReady(ctx, st, loop.Ready(), *interval)
				deps = append(deps, server.Dependency{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
			}
			surfaces, authorize, err := sf.setup(ctx, log, *listen, reg, *grace)
			if err != nil {
				return err
			}
			// Limits inside authorization: they count by the principal it
			// names.
			lim := server.NewLimiter(lf.limits())
			h := authorize(lim.Wrap(server.NewHandler(svc, server.NewHealth(ready, deps...), surfaces, connect.WithInterceptors(tm.Interceptor(), lim.Interceptor()))))

			ln, err := net.Listen("tcp", *listen)
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			ln = server.CapConnections(ln, *lf.maxConns)
			ingestCtx, stopIngest := context.WithCancel(ctx)
			defer stopIngest()
			ingestDone := make(chan struct{})
			if ingestLease == nil {
				log.Info("llmdiag serving", "addr", scheme(tlsConfig)+"://"+ln.Addr().String(), "source", from, "interval", *interval, "window", *window)
				go func() { defer close(ingestDone); loop.Run(ingestCtx) }()
			} else {
				log.Info("llmdiag serving", "addr", scheme(tlsConfig)+"://"+ln.Addr().String(), "source", from, "interval", *interval, "window", *window,
					"redis", redact.URL(*redisURL), "replica", *replicaID, "lease_ttl", *leaseTTL)
				go func() { defer close(ingestDone); leadRefresh(ingestCtx, ingestLease, loop) }()
			}
			go func() {
				select {
				case <-ready:
					log.Info("first refresh done; verdicts available")
				case <-ctx.Done():
				}
			}()
			err = serveMaybeTLS(ctx, ln, h, log, *grace, tlsConfig, lf.serveOptions())
			stopIngest()
			<-ingestDone // a leader releases the lease before the client closes
			log.Info("llmdiag stopped")
			return err
		}),
	}
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
	url, bearer, user, password, ca, cert, key, serverName, nodeLabel, modelLabels *string
	insecure                                                                       *bool
	timeout                                                                        *time.Duration
	maxInFlight, onDemandInFlight                                                  *int
	headers                                                                        headersFlag
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
