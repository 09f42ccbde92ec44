package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/ingest"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// targetsFlag collects repeated --target id=url[,model=…,engine=…] values.
type targetsFlag []fleet.Node

func (t *targetsFlag) String() string { return fmt.Sprint(len(*t), " targets") }

func (t *targetsFlag) Set(v string) error {
	parts := strings.Split(v, ",")
	id, u, ok := strings.Cut(parts[0], "=")
	if !ok {
		return fmt.Errorf("want id=url[,model=NAME][,engine=NAME], got %q", v)
	}
	n := fleet.Node{ID: id, URL: u}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		switch k {
		case "model":
			n.Model = val
		case "engine":
			n.Engine = val
		default:
			return fmt.Errorf("unknown target attribute %q (want model or engine)", k)
		}
	}
	*t = append(*t, n)
	return nil
}

func serveCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve Connect, gRPC, gRPC-Web, health, reflection and /metrics on")
	fleetPath := fs.String("fleet", "", "fleet file (YAML): nodes with id, url, model, engine and profile")
	var targets targetsFlag
	fs.Var(&targets, "target", "a node to scrape, as id=url[,model=NAME][,engine=vllm|sglang]; repeatable, adds to --fleet")
	interval := fs.Duration("interval", 5*time.Second, "time between refreshes of the whole fleet")
	window := fs.String("window", "5m", "default window verdicts are computed for")
	staleAfter := fs.Duration("stale-after", 30*time.Second, "data older than this is stale: verdicts become UNKNOWN")
	scrapeTimeout := fs.Duration("scrape-timeout", 3*time.Second, "deadline of one scrape")
	retention := fs.Duration("retention", time.Hour, "how far back samples are kept for on-demand windows")
	historyLen := fs.Int("history", 360, "refreshes kept per node for spike-vs-sustained reasoning")
	grace := fs.Duration("shutdown-grace", 10*time.Second, "time open requests get to finish on SIGTERM")
	newLog := logFlags(fs)
	return &ffcli.Command{
		Name:       "serve",
		ShortUsage: "llmdiag serve [--fleet FILE] [--target id=url ...] [flags]",
		ShortHelp:  "run the diagnosis service",
		LongHelp: strings.TrimSpace(`
Scrape every node's /metrics every --interval, diagnose each against its
history and its peers, and serve DiagnosisService over Connect, gRPC and
gRPC-Web on one port, with grpc.health.v1, server reflection and the
service's own /metrics. State is kept in memory. Stops gracefully on SIGTERM.`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			log, err := newLog(env.Stderr)
			if err != nil {
				return err
			}
			if _, _, err := metrics.ParseWindow(*window); err != nil {
				return usageError{fmt.Errorf("--window: %w", err)}
			}
			if *interval <= 0 || *staleAfter <= 0 || *scrapeTimeout <= 0 {
				return usageError{errors.New("--interval, --stale-after and --scrape-timeout must be positive")}
			}
			f := &fleet.File{}
			if *fleetPath != "" {
				if f, err = fleet.Load(*fleetPath); err != nil {
					return err
				}
			}
			f.Nodes = append(f.Nodes, targets...)
			if err := f.Validate(); err != nil {
				return usageError{err}
			}
			if len(f.Nodes) == 0 {
				return usageError{errors.New("no nodes to watch: give --fleet FILE or --target id=url")}
			}

			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			tm, err := telemetry.New(reg, time.Now)
			if err != nil {
				return err
			}
			th := diagnose.DefaultThresholds()
			th.StaleAfter = *staleAfter
			st := memory.New(memory.Options{HistoryLen: *historyLen}, strconv.FormatInt(time.Now().UnixNano(), 36))
			scraper := ingest.New(f.Nodes, nil, log, time.Now, ingest.Options{Timeout: *scrapeTimeout, Retention: *retention, StaleAfter: *staleAfter})
			loop := refresh.New(scraper, st, tm, log, time.Now, refresh.Config{Interval: *interval, Window: *window, Thresholds: th})
			svc := server.NewService(st, scraper, log, time.Now, server.Config{DefaultWindow: *window, StaleAfter: *staleAfter, Thresholds: th}, ctx.Done())
			h := server.Handler(svc, server.NewHealth(loop.Ready()), reg, connect.WithInterceptors(tm.Interceptor()))

			ln, err := net.Listen("tcp", *listen)
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			log.Info("llmdiag serving", "addr", "http://"+ln.Addr().String(), "nodes", len(f.Nodes), "interval", *interval, "window", *window)
			go loop.Run(ctx)
			go func() {
				select {
				case <-loop.Ready():
					log.Info("first refresh done; verdicts available", "nodes", len(f.Nodes))
				case <-ctx.Done():
				}
			}()
			err = server.Serve(ctx, ln, h, log, *grace)
			log.Info("llmdiag stopped")
			return err
		}),
	}
}
