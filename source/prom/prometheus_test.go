package prom

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
)

// TestRealPrometheus runs every query of every engine on a real Prometheus
// scraping engine/testdata expositions of nodes with several series (data-
// parallel engine cores, SGLang tensor × pipeline ranks), and checks that a
// refresh reads each node as engine.Extract reads its scrape: gauges, KV
// pressure, capacity, model, parallelism, cumulative histograms and sums —
// for every engine of the table (aliases, OpenTelemetry names, products,
// differences, matched series, scaled microseconds) — and, where the scrape
// counts aborted requests, their rate, absent where it does not; and, on
// the disaggregated fixtures, the role (SGLang's engine_type, Dynamo's
// dynamo_component) and the KV-transfer counters engine.Extract reads,
// absent where it reads none.
func TestRealPrometheus(t *testing.T) {
	// promtest.Start fails the test, saying how to install prometheus, when
	// the binary is missing: this test is never skipped.
	files := []string{
		"vllm-dp2.prom", "sglang-dp2-tp2.prom", "sglang-tp2-pp2.prom", "vllm-otel.prom", "vllm-v0.prom",
		"vllm-v1-dynamo-metrics_examples.prom", "sglang-dynamo-metrics_examples.prom", "sglang-2024-name.prom",
		"trtllm-dynamo.prom", "triton-trtllm.prom", "tgi.prom", "dynamo-frontend.prom", "dynamo-frontend-active.prom",
		"vllm-effects-synthetic.prom",
		// Disaggregated prefill/decode.
		"vllm-nixl-decode.prom", "sglang-pd-prefill.prom", "sglang-pd-decode.prom", "sglang-pd-decode-old.prom",
		"dynamo-vllm-prefill-worker.prom",
	}
	want := map[string]*sample.Sample{}
	var targets []string
	for _, f := range files {
		body, err := os.ReadFile(filepath.Join("..", "..", "engine", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		exp, err := engine.Parse(bytesReader(body), engine.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		fams := exp.Families
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write(body)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		targets = append(targets, ln.Addr().String())
		want[ln.Addr().String()] = engine.Extract(0, fams, time.Now())
		t.Logf("%s serves %s", ln.Addr(), f)
	}
	p := promtest.Start(t, promtest.Options{Targets: targets})
	if err := p.WaitForScrapes(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	src := newTestSource(t, p.URL(), nil)
	src.now = time.Now

	// Every query of every engine, for every window, for all nodes and for
	// one: no error from Prometheus.
	w := newWorker().(*worker)
	for _, lifetime := range []bool{false, true} {
		b := src.builder(time.Minute, lifetime)
		for _, node := range []string{"", targets[0]} {
			if node != "" {
				b, _ = b.forNode(node)
			}
			for _, q := range plan(t, b, engine.Engines()...) {
				if _, err := src.query(t.Context(), w, q, time.Now()); err != nil {
					t.Errorf("%s %s: %v\n%s", q.engine, q.what(), err, q.expr)
				}
			}
		}
	}

	// Aborted requests over a window: the fixtures do not change, so the
	// rate is 0 exactly where the scrape has the aborted series, and
	// absent (UNKNOWN) where it has none (TRT-LLM and vLLM OTel without an
	// abort yet, SGLang without num_aborted_requests_total, vLLM V0).
	windowed, err := src.Refresh(t.Context(), "1m")
	if err != nil {
		t.Fatal(err)
	}
	checkEffects(t, "1m", windowed, want, func(x *sample.Sample) *llmdiagv1.NodeMetrics {
		// The fixtures do not change: the same scrape at both ends.
		return metrics.Compute(x, x, "1m", nil, x.At, time.Hour)
	}, func(id string) string { return files[slices.Index(targets, id)] })
	for _, o := range windowed {
		x, got := want[o.Node.ID], o.Metrics.AbortedRequestsPerSecond
		if (got != nil) != (x.RequestsAborted != nil) || got != nil && *got != 0 {
			t.Errorf("%s: 1m aborted rate %s, scrape has aborted count %s", files[slices.Index(targets, o.Node.ID)], testkit.Show(got), testkit.Show(x.RequestsAborted))
		}
		checkDisagg(t, files[slices.Index(targets, o.Node.ID)]+" 1m", o, x)
	}
	roles := 0

	obs, err := src.Refresh(t.Context(), "lifetime")
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != len(targets) {
		t.Fatalf("got %v, want %v", ids(obs), targets)
	}
	checkEffects(t, "lifetime", obs, want, func(x *sample.Sample) *llmdiagv1.NodeMetrics {
		return metrics.Compute(x, nil, "lifetime", nil, x.At, time.Hour)
	}, func(id string) string { return files[slices.Index(targets, id)] })
	for _, o := range obs {
		x := want[o.Node.ID]
		m := o.Metrics
		t.Run(files[slices.Index(targets, o.Node.ID)], func(t *testing.T) {
			if len(m.GetErrors()) > 0 {
				t.Errorf("errors %q", m.GetErrors())
			}
			checkDisagg(t, "lifetime", o, x)
			if x.Role != llmdiagv1.Role_ROLE_UNSPECIFIED {
				roles++
			}
			// Lifetime: the sample holds the cumulative counters, as a
			// direct scrape's does.
			for _, c := range []struct {
				name      string
				got, want *float64
			}{
				{"kv transfers", o.Sample.KVTransfer.Count, x.KVTransfer.Count},
				{"kv transfer seconds", o.Sample.KVTransfer.Seconds, x.KVTransfer.Seconds},
				{"kv transfer bytes", o.Sample.KVTransfer.Bytes, x.KVTransfer.Bytes},
				{"kv transfer failures", o.Sample.KVTransfer.Failures, x.KVTransfer.Failures},
			} {
				if !nearPtr(c.got, c.want) {
					t.Errorf("%s = %s, scrape says %s", c.name, testkit.Show(c.got), testkit.Show(c.want))
				}
			}
			// The same node read on its own (Source.Window).
			nm, err := src.Window(t.Context(), o.Node.ID, "lifetime", 0)
			if err != nil {
				t.Fatal(err)
			}
			if nm.GetRole() != x.Role || nm.GetRoleSource() != x.RoleSource {
				t.Errorf("window: role %v from %q, scrape says %v from %q", nm.GetRole(), nm.GetRoleSource(), x.Role, x.RoleSource)
			}
			if o.Engine != x.Engine || m.GetModel() != x.Model || o.Sample.DataParallel != x.DataParallel || o.Sample.TensorParallel != x.TensorParallel ||
				o.Sample.PipelineParallel != x.PipelineParallel || o.Sample.ExpertParallel != x.ExpertParallel {
				t.Errorf("engine %v model %q dp %d tp %d, scrape says %v %q %d %d", o.Engine, m.GetModel(),
					o.Sample.DataParallel, o.Sample.TensorParallel, x.Engine, x.Model, x.DataParallel, x.TensorParallel)
			}
			for _, c := range []struct {
				name      string
				got, want *float64
			}{
				{"queue", m.Queue, x.Queue}, {"running", m.Running, x.Running},
				{"kv", m.KvPressure, x.KVUsage}, {"kv capacity", m.KvCapacityTokens, x.KVCapacityTokens},
			} {
				if !nearPtr(c.got, c.want) {
					t.Errorf("%s = %s, scrape says %s", c.name, testkit.Show(c.got), testkit.Show(c.want))
				}
			}
			// Lifetime rates share one duration (since the counters
			// started): aborted / finished is the scrape's ratio of counts.
			// Without that start (Triton, TGI, …) both are absent.
			switch ab, rps := m.AbortedRequestsPerSecond, m.RequestsPerSecond; {
			case x.RequestsAborted == nil || rps == nil:
				if ab != nil {
					t.Errorf("lifetime aborted rate %s, scrape has aborted %s and the requests rate is %s", testkit.Show(ab), testkit.Show(x.RequestsAborted), testkit.Show(rps))
				}
			case ab == nil:
				t.Errorf("no lifetime aborted rate, scrape has aborted %s", testkit.Show(x.RequestsAborted))
			case x.RequestsFinished != nil && *x.RequestsFinished > 0:
				if !near(*ab / *rps, *x.RequestsAborted / *x.RequestsFinished) {
					t.Errorf("aborted/finished rates %v/%v, scrape says %v/%v", *ab, *rps, *x.RequestsAborted, *x.RequestsFinished)
				}
			}
			for h, d := range []interface {
				GetCount() float64
				GetSum() float64
				GetBucketCounts() []float64
			}{m.GetTtft(), m.GetE2E(), m.GetInterToken(), m.GetTimePerOutputToken(), m.GetQueueTime()} {
				xh := x.Hists[h]
				if xt := x.Totals[h]; xh == nil && xt != nil {
					// A mean only (Triton): cumulative sum and count.
					if !near(d.GetCount(), xt.Count) || !near(d.GetSum(), xt.Sum) || len(d.GetBucketCounts()) != 0 {
						t.Errorf("%s: %v, scrape says sum %v count %v", sample.Hist(h), d, xt.Sum, xt.Count)
					}
					continue
				}
				if xh == nil {
					if d.GetCount() != 0 || len(d.GetBucketCounts()) != 0 {
						t.Errorf("%s: %v, scrape has none", sample.Hist(h), d)
					}
					continue
				}
				if d.GetCount() != xh.Count || !slices.Equal(d.GetBucketCounts(), xh.Counts) {
					t.Errorf("%s: count %v buckets %v, scrape says %v %v", sample.Hist(h), d.GetCount(), d.GetBucketCounts(), xh.Count, xh.Counts)
				}
			}
		})
	}
	// The prefill and decode fixtures of SGLang and Dynamo say their role.
	if roles != 4 {
		t.Errorf("%d nodes with a role, want 4", roles)
	}
}

// checkEffects: every node reads the same cache and decoding effects
// through Prometheus (obs) as metrics.Compute gives from its scrape
// (direct), absent exactly where the scrape has none; and at least one
// node of the fixtures has each effect, so that the comparison covers it.
func checkEffects(t *testing.T, window string, obs []source.Observation, want map[string]*sample.Sample,
	direct func(*sample.Sample) *llmdiagv1.NodeMetrics, file func(string) string) {
	t.Helper()
	seen := map[string]int{}
	for _, o := range obs {
		d, m := direct(want[o.Node.ID]), o.Metrics
		for _, c := range []struct {
			name      string
			got, want *float64
		}{
			{"prefix cache hit rate", m.PrefixCacheHitRate, d.PrefixCacheHitRate},
			{"spec acceptance rate", m.SpecDecodeAcceptanceRate, d.SpecDecodeAcceptanceRate},
			{"spec accept length", m.SpecDecodeAcceptLength, d.SpecDecodeAcceptLength},
			{"lora running", m.LoraAdaptersRunning, d.LoraAdaptersRunning},
			{"lora waiting", m.LoraAdaptersWaiting, d.LoraAdaptersWaiting},
			{"max lora", m.MaxLora, d.MaxLora},
		} {
			if !nearPtr(c.got, c.want) {
				t.Errorf("%s %s: %s = %s through prometheus, %s direct", window, file(o.Node.ID), c.name, testkit.Show(c.got), testkit.Show(c.want))
			}
			if c.got != nil {
				seen[c.name]++
			}
		}
		if !slices.Equal(m.GetLoraRunningAdapters(), d.GetLoraRunningAdapters()) || !slices.Equal(m.GetLoraWaitingAdapters(), d.GetLoraWaitingAdapters()) {
			t.Errorf("%s %s: lora adapters running %q waiting %q through prometheus, %q and %q direct", window, file(o.Node.ID),
				m.GetLoraRunningAdapters(), m.GetLoraWaitingAdapters(), d.GetLoraRunningAdapters(), d.GetLoraWaitingAdapters())
		}
		if m.GetKvOffload() != d.GetKvOffload() {
			t.Errorf("%s %s: kv offload %q through prometheus, %q direct", window, file(o.Node.ID), m.GetKvOffload(), d.GetKvOffload())
		}
		if m.GetKvOffload() != "" {
			seen["kv offload"]++
		}
	}
	t.Logf("%s: nodes with each effect: %v", window, seen)
	need := []string{"prefix cache hit rate", "lora running", "lora waiting", "max lora", "kv offload"}
	if window == "lifetime" {
		// Over a window the fixtures' counters do not move: no ratio.
		need = append(need, "spec acceptance rate", "spec accept length")
	}
	for _, n := range need {
		if seen[n] == 0 {
			t.Errorf("%s: no node has %s: the comparison does not cover it", window, n)
		}
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// checkDisagg holds o, read through Prometheus, to x, the direct scrape of
// the same exposition: the same role from the same label, and a KV-transfer
// rate exactly where x has the counter. The fixtures do not change, so
// every windowed rate is 0 and no transfer ends in the window: no mean.
func checkDisagg(t *testing.T, what string, o source.Observation, x *sample.Sample) {
	t.Helper()
	m := o.Metrics
	if m.GetRole() != x.Role || m.GetRoleSource() != x.RoleSource || o.Sample.Role != x.Role || o.Sample.RoleSource != x.RoleSource {
		t.Errorf("%s: role %v from %q (sample %v), scrape says %v from %q", what, m.GetRole(), m.GetRoleSource(), o.Sample.Role, x.Role, x.RoleSource)
	}
	windowed := m.GetWindow() != metrics.Lifetime
	for _, c := range []struct {
		name    string
		got, of *float64
	}{
		{"kv transfers/s", m.KvTransfersPerSecond, x.KVTransfer.Count},
		{"kv transfer bytes/s", m.KvTransferBytesPerSecond, x.KVTransfer.Bytes},
		{"kv transfer failures/s", m.KvTransferFailuresPerSecond, x.KVTransfer.Failures},
	} {
		// Over the lifetime a rate needs the counters' start, which no
		// fixture has: absent, as metrics.Compute has it.
		if want := windowed && c.of != nil; (c.got != nil) != want || c.got != nil && *c.got != 0 {
			t.Errorf("%s: %s = %s, scrape has %s", what, c.name, testkit.Show(c.got), testkit.Show(c.of))
		}
	}
	if m.KvTransferSecondsMean != nil {
		t.Errorf("%s: mean KV transfer time %s with no transfer", what, testkit.Show(m.KvTransferSecondsMean))
	}
}
