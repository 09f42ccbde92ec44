package promtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// fleetExposition serves, on loopback, one /metrics page with n vLLM nodes,
// each its own instance label value (Prometheus keeps them with
// honor_labels): queue and running gauges, a generation counter and a TTFT
// histogram that grow with every scrape.
type fleetExposition struct {
	*httptest.Server
	labels  []string // per node, rendered once
	scrapes atomic.Int64
}

func startFleetExposition(t *testing.T, n int) *fleetExposition {
	t.Helper()
	e := &fleetExposition{labels: make([]string, n)}
	for i := range n {
		e.labels[i] = fmt.Sprintf(`instance=%q,engine="0",model_name="m"`, fleetInstance(i))
	}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func fleetInstance(i int) string { return fmt.Sprintf("10.1.%d.%d:8000", i/250, i%250) }

// ttftBuckets are the TTFT buckets and the share of a scrape's ten requests
// in each, cumulative, for fast nodes and (every tenth node) slow ones.
var ttftBuckets = []struct {
	le         string
	fast, slow float64
}{{"0.1", 2, 0}, {"0.5", 6, 0}, {"1", 9, 9}, {"2.5", 10, 10}, {"+Inf", 10, 10}}

func (e *fleetExposition) serve(w http.ResponseWriter, _ *http.Request) {
	k := float64(e.scrapes.Add(1))
	b := make([]byte, 0, 1<<20)
	num := func(v float64) { b = strconv.AppendFloat(b, v, 'g', -1, 64) }
	series := func(name, ls string) {
		b = append(b, name...)
		b = append(b, '{')
		b = append(b, ls...)
		b = append(b, "} "...)
	}
	b = append(b, "# TYPE vllm:num_requests_waiting gauge\n"...)
	for i, ls := range e.labels {
		series("vllm:num_requests_waiting", ls)
		num(float64(i % 3))
		b = append(b, '\n')
	}
	b = append(b, "# TYPE vllm:num_requests_running gauge\n"...)
	for _, ls := range e.labels {
		series("vllm:num_requests_running", ls)
		b = append(b, "8\n"...)
	}
	b = append(b, "# TYPE vllm:generation_tokens_total counter\n"...)
	for _, ls := range e.labels {
		series("vllm:generation_tokens_total", ls)
		num(1000 * k)
		b = append(b, '\n')
	}
	b = append(b, "# TYPE vllm:time_to_first_token_seconds histogram\n"...)
	for i, ls := range e.labels {
		for _, bk := range ttftBuckets {
			series("vllm:time_to_first_token_seconds_bucket", ls+`,le="`+bk.le+`"`)
			if i%10 == 0 {
				num(bk.slow * k)
			} else {
				num(bk.fast * k)
			}
			b = append(b, '\n')
		}
		series("vllm:time_to_first_token_seconds_sum", ls)
		num(6 * k)
		b = append(b, '\n')
		series("vllm:time_to_first_token_seconds_count", ls)
		num(10 * k)
		b = append(b, '\n')
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write(b)
}

// queryForm is the form of a Prometheus API query, from its URL and its
// body, leaving the body for the proxy to forward.
func queryForm(r *http.Request) (url.Values, error) {
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	// ParseForm read the body: hand the proxy the form again.
	body := r.PostForm.Encode()
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	return r.Form, nil
}

// countingProxy forwards to Prometheus and counts the queries, the most in
// flight at once, and the evaluation times asked for.
type countingProxy struct {
	*httptest.Server
	queries, inFlight, peak atomic.Int64

	mu    sync.Mutex
	times map[string]int
}

func startCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &countingProxy{times: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/query" {
			form, err := queryForm(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			p.queries.Add(1)
			n := p.inFlight.Add(1)
			defer p.inFlight.Add(-1)
			for old := p.peak.Load(); n > old && !p.peak.CompareAndSwap(old, n); old = p.peak.Load() {
			}
			p.mu.Lock()
			p.times[form.Get("time")]++
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// mark returns the queries so far and forgets the evaluation times seen.
func (p *countingProxy) mark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.times)
	return p.queries.Load()
}

func (p *countingProxy) evaluationTimes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.times)
}

// TestOnDemandCostAgainstRealPrometheus: a real Prometheus holding 1,000
// vLLM nodes, behind a proxy that counts queries.
//
//   - ComparePercentiles over the 1,000 nodes with a non-default window and
//     a baseline, while a refresh runs beside it, costs at most twice the
//     refresh's queries, and every node has its values now and then;
//   - twenty GetNodeMetrics with offsets a second apart cost at most two
//     query sets (two evaluation times, at most two refreshes' queries);
//   - a comparison over its query budget is refused with ResourceExhausted
//     naming the budget and its flag, and sends nothing;
//   - never more queries in flight than --prometheus-max-in-flight.
//
// It runs alone (not in parallel with the package's other tests): a
// Prometheus ingesting 10,000 series every 2 s is load enough.
func TestOnDemandCostAgainstRealPrometheus(t *testing.T) {
	const nodes = 1000
	fe := startFleetExposition(t, nodes)
	_, port, _ := net.SplitHostPort(fe.Listener.Addr().String())
	p := promtest.Start(t, promtest.Options{ScrapeInterval: 2 * time.Second, ExtraScrapeConfigs: fmt.Sprintf(`
- job_name: fleet
  honor_labels: true
  static_configs:
    - targets: ["127.0.0.1:%s"]
`, port)})
	proxy := startCountingProxy(t, p.URL())

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The reads below go back 20 s over 30 s and 40 s windows: wait until
	// every node has TTFT observations there.
	if err := p.WaitForSamples(ctx, fmt.Sprintf(`count(increase(vllm:time_to_first_token_seconds_count[30s] offset 20s) > 0) == %d`, nodes), 1); err != nil {
		t.Fatal(err)
	}

	const maxInFlight, onDemandInFlight = 6, 2
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := prom.New(prom.Config{URL: proxy.URL, Timeout: 30 * time.Second, MaxInFlight: maxInFlight, OnDemandInFlight: onDemandInFlight}, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := telemetry.New(prometheus.NewRegistry(), time.Now)
	th := diagnose.DefaultThresholds()
	st := memory.New(memory.Options{}, "ondemand")
	loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	perRefresh := int64(src.QueriesLastRefresh())
	if recs, err := st.List(ctx); err != nil || len(recs) != nodes {
		t.Fatalf("the refresh stored %d nodes (%v), want %d", len(recs), err, nodes)
	}
	svc := func(budget int) *server.Service {
		return server.NewService(st, src, log, time.Now, server.Config{
			DefaultWindow: metrics.DefaultWindow, StaleAfter: time.Minute, Thresholds: th,
			OffsetStep: 20 * time.Second, RequestQueryBudget: budget,
		}, ctx.Done())
	}

	t.Run("compare 1000 nodes with a baseline", func(t *testing.T) {
		before := proxy.mark()
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := loop.Once(ctx); err != nil {
				t.Errorf("refresh beside the comparison: %v", err)
			}
		})
		resp, err := svc(0).ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{
			Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Window: "30s", BaselineOffset: durationpb.New(20 * time.Second),
		}))
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		cost := proxy.queries.Load() - before - perRefresh // less the refresh beside it
		t.Logf("a refresh: %d queries; ComparePercentiles over %d nodes, 30s window, 20s baseline: %d", perRefresh, nodes, cost)
		if cost > 2*perRefresh {
			t.Errorf("the comparison cost %d queries, more than two refreshes' %d", cost, 2*perRefresh)
		}
		rows := resp.Msg.GetRows()
		if len(rows) != 2*nodes {
			t.Fatalf("%d rows, want %d pairs", len(rows), nodes)
		}
		for i := 0; i < len(rows); i += 2 {
			now, then := rows[i], rows[i+1]
			if now.GetValues()[0].GetRank() == 0 || then.GetNote() != "" || then.GetCount() <= 0 || now.GetRatioToBaseline() == 0 {
				t.Fatalf("%s: now rank %d, baseline count %v note %q ratio %v", now.GetSubject(),
					now.GetValues()[0].GetRank(), then.GetCount(), then.GetNote(), now.GetRatioToBaseline())
			}
		}
		if b := resp.Msg.GetBaselineOffset().AsDuration(); b != 20*time.Second {
			t.Errorf("baseline read at %v, want 20s", b)
		}
	})

	t.Run("twenty offsets a second apart", func(t *testing.T) {
		s := svc(0)
		before := proxy.mark()
		for i := range 20 {
			// 1s…20s round to 0s or 20s, the step of a 40s window here.
			resp, err := s.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{
				Node: fleetInstance(i * 37), Window: "40s", Offset: durationpb.New(time.Duration(i+1) * time.Second),
			}))
			if err != nil {
				t.Fatal(err)
			}
			if m := resp.Msg.GetMetrics(); m.GetTtft().GetCount() <= 0 || m.GetOffset().AsDuration()%(20*time.Second) != 0 {
				t.Fatalf("offset %ds: ttft count %v, read at %v", i+1, m.GetTtft().GetCount(), m.GetOffset().AsDuration())
			}
		}
		cost, sets := proxy.queries.Load()-before, proxy.evaluationTimes()
		t.Logf("twenty offsets 1s apart: %d queries at %d evaluation times", cost, sets)
		if sets > 2 || cost > 2*perRefresh {
			t.Errorf("twenty offsets cost %d queries at %d evaluation times, want at most two query sets (%d)", cost, sets, 2*perRefresh)
		}
	})

	t.Run("over budget", func(t *testing.T) {
		before := proxy.mark()
		_, err := svc(50).ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{
			Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Window: "45s",
		}))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted ||
			!strings.Contains(ce.Message(), "budget of 50") || !strings.Contains(ce.Message(), "--max-request-queries") {
			t.Fatalf("err = %v, want resource_exhausted naming the budget of 50 and --max-request-queries", err)
		}
		if n := proxy.queries.Load() - before; n != 0 {
			t.Errorf("a refused comparison sent %d queries", n)
		}
	})

	if peak := proxy.peak.Load(); peak > maxInFlight {
		t.Errorf("%d queries in flight at once, over the limit of %d", peak, maxInFlight)
	}
	t.Logf("peak queries in flight at the proxy: %d (limit %d)", proxy.peak.Load(), maxInFlight)
}
