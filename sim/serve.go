package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	loopback    = "127.0.0.1"
	defaultTick = 20 * time.Millisecond
	minWallTick = 10 * time.Millisecond
	warmupChunk = time.Minute
)

// endpoint is a node's HTTP server while the node is up.
type endpoint struct {
	ln  net.Listener // bound by Listen, not yet served
	srv *http.Server // serving
}

// Listen binds one loopback listener per node (127.0.0.1:BasePort+i, or a
// free port), so FleetFile has URLs before Start. It is idempotent; Start
// calls it if needed.
func (f *Fleet) Listen() error {
	f.smu.Lock()
	defer f.smu.Unlock()
	if f.listening {
		return nil
	}
	var lc net.ListenConfig
	for i, n := range f.nodes {
		port := 0
		if f.cfg.BasePort > 0 {
			port = f.cfg.BasePort + i
		}
		ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(loopback, strconv.Itoa(port)))
		if err != nil {
			for _, m := range f.nodes[:i] {
				m.ep.ln.Close()
				m.ep, m.addr = nil, ""
			}
			return fmt.Errorf("listen for node %s: %w", n.cfg.ID, err)
		}
		n.addr = ln.Addr().String()
		n.ep = &endpoint{ln: ln}
	}
	f.listening = true
	return nil
}

// Start binds the listeners (see Listen), fast-forwards Config.Warmup of
// simulated time, then serves every node's /metrics (and /health) and
// advances the simulation Speed times faster than the Clock until ctx is
// done. Nodes go down and up on their Down schedule and SetDown. It returns
// nil once ctx is done and every server has stopped; it may be called once.
func (f *Fleet) Start(ctx context.Context) error {
	if err := f.Listen(); err != nil {
		return err
	}
	f.smu.Lock()
	started := f.started
	f.started = true
	f.smu.Unlock()
	if started {
		return errors.New("sim: fleet already started")
	}
	defer f.shutdown()

	for f.Now() < f.cfg.Warmup {
		if ctx.Err() != nil {
			return nil
		}
		f.Step(min(warmupChunk, f.cfg.Warmup-f.Now()))
	}
	// Simulated time runs from the moment the nodes start serving.
	wall0, sim0 := f.clock.Now(), f.Now()
	f.reconcile()

	speed := f.cfg.Speed
	if speed == 0 {
		speed = 1
	}
	tick := f.cfg.Tick
	if tick == 0 {
		tick = defaultTick
	}
	ticker := time.NewTicker(max(time.Duration(float64(tick)/speed), minWallTick))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		target := sim0 + time.Duration(float64(f.clock.Now().Sub(wall0))*speed)
		f.Step(target - f.Now())
		f.reconcile()
	}
}

// reconcile opens or closes each node's listener to match its down state.
// It does nothing before Start.
func (f *Fleet) reconcile() {
	f.smu.Lock()
	defer f.smu.Unlock()
	if !f.started {
		return
	}
	now := f.Now()
	for _, n := range f.nodes {
		down := f.downAt(n, now)
		switch {
		case down && n.ep != nil:
			n.ep.close()
			n.ep = nil
			f.log.Info("sim node down", "node", n.cfg.ID, "addr", n.addr)
		case !down && n.ep == nil:
			ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", n.addr)
			if err != nil {
				f.log.Warn("sim node cannot come back up", "node", n.cfg.ID, "err", err)
				continue
			}
			n.ep = &endpoint{ln: ln}
			f.serve(n)
			f.log.Info("sim node up", "node", n.cfg.ID, "addr", n.addr)
		case !down && n.ep.srv == nil:
			f.serve(n)
		}
	}
}

// serve starts the HTTP server of n on its bound listener.
func (f *Fleet) serve(n *node) {
	metrics := promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if Garbage(n.garbage.Load()) == GarbageNone {
			metrics.ServeHTTP(w, r)
			return
		}
		body, err := n.body()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(body)
	})
	mux.Handle("GET "+DCGMPath, promhttp.HandlerFor(n.dcgm, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	api, _ := f.Handler(n.cfg.ID)
	mux.Handle("POST /v1/", api)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln := n.ep.ln
	n.ep.srv, n.ep.ln = srv, nil
	f.wg.Go(func() { srv.Serve(ln) })
}

// close stops the endpoint: the listener and every open connection, so
// clients see connection refused (or reset), not stale answers.
func (e *endpoint) close() {
	if e.srv != nil {
		e.srv.Close()
	}
	if e.ln != nil {
		e.ln.Close()
	}
}

// shutdown closes every endpoint and waits for the servers to return.
func (f *Fleet) shutdown() {
	f.smu.Lock()
	for _, n := range f.nodes {
		if n.ep != nil {
			n.ep.close()
			n.ep = nil
		}
	}
	f.smu.Unlock()
	f.wg.Wait()
}
