package promtest_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// slowProxy is a reverse proxy on loopback in front of a real Prometheus
// that answers every request delay after it arrived (or when Prometheus
// answers, if that is later): every answer takes the same time, whatever
// Prometheus's own. It records the largest timeout a query asked of
// Prometheus.
type slowProxy struct {
	*httptest.Server
	delay      atomic.Int64 // time.Duration
	mu         sync.Mutex
	maxTimeout time.Duration
	queries    int
}

func newSlowProxy(t *testing.T, target string) *slowProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &slowProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		until := time.Now().Add(time.Duration(p.delay.Load()))
		if r.URL.Path == "/api/v1/query" {
			form, err := queryForm(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			d, err := time.ParseDuration(form.Get("timeout"))
			p.mu.Lock()
			p.queries++
			if err == nil && d > p.maxTimeout {
				p.maxTimeout = d
			}
			p.mu.Unlock()
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		wait := time.NewTimer(time.Until(until))
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-r.Context().Done():
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(p.Close)
	return p
}

// stats returns and resets what the proxy recorded.
func (p *slowProxy) stats() (queries int, maxTimeout time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	queries, maxTimeout = p.queries, p.maxTimeout
	p.queries, p.maxTimeout = 0, 0
	return queries, maxTimeout
}

// TestSlowPrometheus: a real Prometheus behind a proxy that makes every
// answer take the same time. The timings are `serve`'s at its default
// --interval (5s): a refresh timeout of 10s, --prometheus-timeout 10s, 8
// queries in flight, and answers of 2.5 s and 8 s — all scaled by 0.5, so
// the ratios, the mechanism and the number of query rounds that fit are
// the same, in less time.
//
// At 2.5 s (1.25 s here) three rounds of 8 queries fit in a refresh: every
// refresh completes, every node is listed with its queue, running and KV
// gauges (queried first), and what did not fit is absent with the timeout
// named. At 8 s (4 s here) one round fits: the first refresh finds the
// nodes but no data arrives, so it fails (the refresh loop keeps the last
// good records); from the second on the data queries of the engines seen go
// out next to the identity queries, and the families that finish — each
// engine's queue, the most important first — are used, the others absent
// with the timeout named. A round then ends 1 s (0.5 s here) before the
// queries' deadline: on a loaded machine a round may miss it, and the
// next refresh is tried, a few times at most.
func TestSlowPrometheus(t *testing.T) {
	t.Parallel()
	sf := startSeedFleet(t, 3)
	proxy := newSlowProxy(t, sf.prom.URL())
	const scale = 0.5
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	refreshTimeout := scaled(10 * time.Second) // refresh.Config's default at --interval 5s
	queryTimeout := scaled(10 * time.Second)   // --prometheus-timeout's default

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newLoop := func() (*refresh.Loop, *memory.Store) {
		src, err := prom.New(prom.Config{URL: proxy.URL, NodeLabel: "node", Timeout: queryTimeout}, log, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		tm, _ := telemetry.New(prometheus.NewRegistry(), time.Now)
		st := memory.New(memory.Options{}, "r")
		return refresh.New(src, st, tm, log, time.Now, refresh.Config{
			Window: metrics.Window(15 * time.Second), Thresholds: diagnose.DefaultThresholds(),
			Interval: scaled(5 * time.Second), Timeout: refreshTimeout,
		}), st
	}
	once := func(loop *refresh.Loop) error {
		t.Helper()
		start := time.Now()
		err := loop.Once(t.Context())
		if took := time.Since(start); took >= refreshTimeout {
			t.Errorf("refresh took %v, not within its timeout %v", took, refreshTimeout)
		}
		if _, maxTimeout := proxy.stats(); maxTimeout >= refreshTimeout || maxTimeout > queryTimeout {
			t.Errorf("a query asked Prometheus for %v, want less than the refresh's %v and at most %v", maxTimeout, refreshTimeout, queryTimeout)
		}
		return err
	}
	list := func(st *memory.Store) []*store.Record {
		t.Helper()
		recs, err := st.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(sf.instance) {
			t.Fatalf("%d nodes listed, want every one of %d", len(recs), len(sf.instance))
		}
		return recs
	}
	// promScrapeMissed names a node whose own scrape by Prometheus (every
	// 1 s, 1 s timeout) failed before the refresh: the node then reads
	// up == 0 whatever the queries did. On a loaded machine it can.
	promScrapeMissed := func(st *memory.Store) string {
		t.Helper()
		for _, r := range list(st) {
			for _, e := range r.Metrics.GetErrors() {
				if strings.HasPrefix(e, "prometheus cannot scrape the target") {
					return r.Node.GetId() + ": " + e
				}
			}
		}
		return ""
	}
	timedOut := func(m *llmdiagv1.NodeMetrics, family string) bool {
		for _, e := range m.GetErrors() {
			if strings.HasPrefix(e, family+" ") && strings.Contains(e, "timeout") {
				return true
			}
		}
		return false
	}

	t.Run("2.5s", func(t *testing.T) {
		proxy.delay.Store(int64(scaled(2500 * time.Millisecond)))
		loop, st := newLoop()
		// Two refreshes are checked; one after which Prometheus's own
		// scrape of a node had missed is tried again, a few times at most.
		retries := 0
		for i := 0; i < 2; {
			if err := once(loop); err != nil {
				t.Fatalf("refresh %d: %v", i+1, err)
			}
			if missed := promScrapeMissed(st); missed != "" && retries < 5 {
				retries++
				t.Logf("refresh %d tried again: %s", i+1, missed)
				continue
			}
			for _, r := range list(st) {
				m := r.Metrics
				if !m.GetUp() || m.Queue == nil || m.Running == nil || m.KvPressure == nil {
					t.Errorf("refresh %d: %s: up %v queue %v running %v kv %v, want up with the three gauges; errors %q",
						i+1, r.Node.GetId(), m.GetUp(), m.Queue, m.Running, m.KvPressure, m.GetErrors())
				}
			}
			i++
		}
		// 49 data queries do not fit in 3 rounds of 8: some are named.
		named := 0
		for _, r := range list(st) {
			for _, e := range r.Metrics.GetErrors() {
				if strings.Contains(e, "timeout") {
					named++
				}
			}
		}
		if named == 0 {
			t.Error("no concept is absent with a timeout named, though not every query fits in the refresh")
		}
	})

	t.Run("8s", func(t *testing.T) {
		proxy.delay.Store(int64(scaled(8 * time.Second)))
		loop, st := newLoop()
		if err := once(loop); !errors.Is(err, prom.ErrNoData) {
			t.Fatalf("first refresh: %v, want ErrNoData (nodes found, no data in time)", err)
		}
		// On a loaded machine a refresh can succeed with a round missed for
		// one engine (its queue not sent in time), or after Prometheus's
		// own 1 s scrape of a node missed (the node then reads up == 0,
		// whatever the queries did). Such a refresh is tried again too, as
		// one that missed its round entirely.
		scrapeMissed := func() string {
			for _, r := range list(st) {
				if m := r.Metrics; m.Queue == nil && timedOut(m, "queue") {
					return r.Node.GetId() + ": its queue's round missed the deadline"
				}
			}
			return promScrapeMissed(st)
		}
		var err error
		for i := range 5 {
			if err = once(loop); err == nil {
				missed := scrapeMissed()
				if missed == "" {
					t.Logf("refresh %d succeeded", i+2)
					break
				}
				err = fmt.Errorf("a round or a scrape missed: %s", missed)
			}
			t.Logf("refresh %d: %v", i+2, err)
		}
		if err != nil {
			t.Fatalf("no refresh succeeded after the first: %v", err)
		}
		for _, r := range list(st) {
			m := r.Metrics
			if !m.GetUp() || m.Queue == nil {
				t.Errorf("%s: up %v queue %v, want up with its queue, the first family of its engine; errors %q", r.Node.GetId(), m.GetUp(), m.Queue, m.GetErrors())
			}
			if m.GetTtft() != nil || !timedOut(m, "ttft") {
				t.Errorf("%s: ttft %v, want absent with the timeout named; errors %q", r.Node.GetId(), m.GetTtft(), m.GetErrors())
			}
		}
	})
}
