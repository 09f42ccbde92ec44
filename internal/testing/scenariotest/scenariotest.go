package scenariotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store/memory"
)

// Options describe one run. Zero values take the defaults shown.
type Options struct {
	// Scenario is a sim.Scenario name; Seed its seed (default 1).
	Scenario string
	Seed     int64
	// Engine is the schema the fleet is exposed in (default: each node's
	// own, as the scenario defines it).
	Engine sim.Engine
	// Warmup is simulated time before the first refresh (default
	// sim.SeedWarmup). Down windows are measured from its end, as with
	// sim.Fleet.Start.
	Warmup time.Duration
	// Duration is simulated time refreshed after the warm-up (default 15m).
	Duration time.Duration
	// Interval between refreshes (default 5s) and the verdicts' window
	// (default metrics.DefaultWindow), as `llmdiag serve` defaults them.
	Interval time.Duration
	Window   metrics.Window
	// Loopback serves the expositions from a loopback HTTP server instead
	// of the in-process transport.
	Loopback bool
	// Edit, when set, changes the scenario's configuration before the fleet
	// is built.
	Edit func(*sim.Config)
	// Thresholds, when set, changes llmdiag's thresholds (the defaults,
	// stale after 30 s) before the run: SLOs, say. With SLOs the scraper
	// keeps samples for the SLO windows, as `llmdiag serve` does
	// (refresh.SLORetention).
	Thresholds func(*diagnose.Thresholds)
}

func (o *Options) defaults() {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Warmup == 0 {
		o.Warmup = sim.SeedWarmup
	}
	if o.Duration == 0 {
		o.Duration = 15 * time.Minute
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Second
	}
	o.Window = o.Window.Or(metrics.DefaultWindow)
}

// Reading is one node's state as stored by one refresh.
type Reading struct {
	// At is simulated time since the end of the warm-up.
	At     time.Duration
	Status llmdiagv1.Status
	Cause  llmdiagv1.Cause
	// Metrics and Diagnosis are the stored record's.
	Metrics   *llmdiagv1.NodeMetrics
	Diagnosis *llmdiagv1.Diagnosis
	// Sim is the simulated node's true state at the refresh.
	Sim sim.NodeStats
}

// Result is every node's readings of one run.
type Result struct {
	Options Options
	// Config is the simulated fleet's, with the engine and Edit applied.
	Config sim.Config
	// Nodes in the scenario's order.
	Nodes    []string
	Readings map[string][]Reading
	// Wall is the wall-clock time the run took.
	Wall time.Duration
}

// epoch is the fake clock's time at simulated time 0.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type nopRecorder struct{}

func (nopRecorder) ObserveRefresh(time.Duration, error)      {}
func (nopRecorder) SetNodeStatuses(map[llmdiagv1.Status]int) {}
func (nopRecorder) ObserveNodeSet(refresh.NodeSet)           {}

// Run runs one scenario in one schema and returns every node's readings.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	start := time.Now()
	cfg, err := sim.Scenario(o.Scenario, o.Seed)
	if err != nil {
		return nil, err
	}
	if o.Engine != "" {
		cfg = sim.WithEngine(cfg, o.Engine)
	}
	cfg.Warmup = o.Warmup
	if o.Edit != nil {
		o.Edit(&cfg)
	}
	f, err := sim.New(cfg)
	if err != nil {
		return nil, err
	}
	f.Step(o.Warmup)

	clk := testkit.NewClock(epoch.Add(f.Now()))
	targets := f.FleetFile().Nodes
	client := &http.Client{Transport: simTransport{f}}
	base := "http://sim"
	if o.Loopback {
		srv := httptest.NewServer(simHandler(f))
		defer srv.Close()
		client, base = srv.Client(), srv.URL
	}
	byID := make(map[string]fleet.Node, len(targets))
	for i := range targets {
		targets[i].URL = base + "/" + targets[i].ID + "/metrics"
		targets[i].DCGM = base + "/" + targets[i].ID + sim.DCGMPath
		byID[targets[i].ID] = targets[i]
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("SCENARIOTEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second // llmdiag serve's --stale-after default
	if o.Thresholds != nil {
		o.Thresholds(&th)
	}
	st := memory.New(memory.Options{Now: clk.Now}, "scenariotest")
	scraper := scrape.New(targets, client, log, clk.Now, scrape.Options{StaleAfter: th.StaleAfter, LongRetention: refresh.SLORetention(th)})
	loop := refresh.New(scraper, st, nopRecorder{}, log, clk.Now, refresh.Config{
		Interval: o.Interval, Window: o.Window, Thresholds: th, Fleet: byID,
	})

	res := &Result{Options: o, Config: cfg, Nodes: f.Nodes(), Readings: make(map[string][]Reading)}
	for at := time.Duration(0); at <= o.Duration; at += o.Interval {
		if at > 0 {
			f.Step(o.Interval)
		}
		clk.Set(epoch.Add(f.Now()))
		if err := loop.Once(ctx); err != nil {
			return nil, fmt.Errorf("refresh at %v: %w", at, err)
		}
		for _, id := range res.Nodes {
			rec, err := st.Get(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("refresh at %v: %w", at, err)
			}
			st, err := f.Stats(id)
			if err != nil {
				return nil, err
			}
			r := Reading{
				At: at, Status: rec.Node.GetStatus(), Cause: rec.Node.GetRootCause(),
				Metrics: rec.Metrics, Diagnosis: rec.Diagnosis, Sim: st,
			}
			res.Readings[id] = append(res.Readings[id], r)
		}
	}
	res.Wall = time.Since(start)
	return res, nil
}

// History is the history the rules read at a node's i-th reading, rebuilt
// from the readings as refresh stores it: the points of up to
// memory.DefaultHistoryLen refreshes, the i-th last.
func (r *Result) History(node string, i int) []diagnose.Point {
	rs := r.Readings[node]
	from := max(0, i+1-memory.DefaultHistoryLen)
	var out []diagnose.Point
	for _, x := range rs[from : i+1] {
		p := refresh.PointOf(x.Metrics)
		p.Status = x.Status
		out = append(out, p)
	}
	return out
}

// simTransport answers GET /<node>/metrics, and /<node>/dcgm/metrics (the
// node's DCGM exporter), from the simulator.
type simTransport struct{ f *sim.Fleet }

func (t simTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	id, read, ok := nodeOf(t.f, req.URL.Path)
	if !ok {
		return respond(req, http.StatusNotFound, []byte("not found\n")), nil
	}
	body, err := read(id)
	switch {
	case errors.Is(err, sim.ErrNodeDown):
		// What a closed listener gives a client.
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case errors.Is(err, sim.ErrUnknownNode):
		return respond(req, http.StatusNotFound, []byte(err.Error()+"\n")), nil
	case err != nil:
		return respond(req, http.StatusInternalServerError, []byte(err.Error()+"\n")), nil
	}
	return respond(req, http.StatusOK, body), nil
}

func respond(req *http.Request, code int, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// simHandler serves GET /<node>/metrics from the simulator over real HTTP;
// a down node's connection is closed without an answer.
func simHandler(f *sim.Fleet) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, read, ok := nodeOf(f, r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		body, err := read(id)
		switch {
		case errors.Is(err, sim.ErrNodeDown):
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(body)
	})
}

// nodeOf is the node a path names and how to read what it asks for: the
// engine's exposition (/<node>/metrics) or its DCGM exporter's
// (/<node>/dcgm/metrics).
func nodeOf(f *sim.Fleet, path string) (string, func(string) ([]byte, error), bool) {
	id, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	switch {
	case !ok || id == "":
		return "", nil, false
	case rest == "metrics":
		return id, f.Metrics, true
	case "/"+rest == sim.DCGMPath:
		return id, f.DCGM, true
	}
	return "", nil, false
}
