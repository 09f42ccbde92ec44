package prom

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/source"
)

// identityOf is the identity query of engine e in the plan of
// defaultBuilder, which newTestSource's defaults also build.
func identityOf(t *testing.T, e llmdiagv1.Engine) query {
	t.Helper()
	m, _ := engine.Lookup(e)
	q, err := defaultBuilder("5m").identity(m)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func byID(obs []source.Observation) map[string]source.Observation {
	out := map[string]source.Observation{}
	for _, o := range obs {
		out[o.Node.ID] = o
	}
	return out
}

// TestRefreshDeadline: queries that do not answer before the refresh's
// deadline leave their concepts absent with the timeout named; what
// answered is used, and Refresh returns before the deadline.
func TestRefreshDeadline(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("5m"))
	serve := fake.ServeHTTP
	fake.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err == nil && strings.Contains(r.Form.Get("query"), "_bucket") {
			<-r.Context().Done() // the buckets never answer
			return
		}
		serve(w, r)
	})
	src := newTestSource(t, fake.URL, nil) // Config.Timeout 5s: the refresh's deadline comes first
	const budget = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	start := time.Now()
	obs, err := src.Refresh(ctx, "5m")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if took >= budget {
		t.Errorf("refresh took %v, not within its deadline %v", took, budget)
	}
	a, ok := byID(obs)["vllm-a:8000"]
	if !ok {
		t.Fatalf("vllm-a missing: %v", obs)
	}
	m := a.Metrics
	if m.Queue == nil || m.GetTtft() != nil {
		t.Errorf("queue %v ttft %v, want the queue and no ttft", m.Queue, m.GetTtft())
	}
	errs := strings.Join(m.GetErrors(), "\n")
	if !strings.Contains(errs, "ttft buckets: timeout: no answer within") || !strings.Contains(errs, "refresh deadline") {
		t.Errorf("errors %q do not name the ttft buckets' timeout", m.GetErrors())
	}
}

// TestRefreshHint: from the second refresh on, the data queries of the
// engines that had nodes go out next to the identity queries instead of
// waiting for their answers.
func TestRefreshHint(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("5m"))
	serve := fake.ServeHTTP
	// An identity query answers when a data query arrives, or after a
	// second: data queries that wait for the identities come after it.
	var (
		mu       sync.Mutex
		data     chan struct{} // closed when a data query arrives
		answered bool          // an identity query answered
		early    int           // data queries that arrived before
	)
	fake.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		ch := data
		mu.Unlock()
		if strings.Contains(r.Form.Get("query"), "timestamp(") {
			select {
			case <-ch:
			case <-time.After(time.Second):
			}
			mu.Lock()
			answered = true
			mu.Unlock()
		} else {
			mu.Lock()
			if !answered {
				early++
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
			mu.Unlock()
		}
		serve(w, r)
	})
	src := newTestSource(t, fake.URL, nil)
	for i, want := range []string{"none", "some"} {
		mu.Lock()
		data, answered, early = make(chan struct{}), false, 0
		mu.Unlock()
		if _, err := src.Refresh(t.Context(), "5m"); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := early
		mu.Unlock()
		if (got > 0) != (want == "some") {
			t.Errorf("refresh %d: %d data queries before an identity answered, want %s", i+1, got, want)
		}
	}
}

// TestInvalidNodeIDs: ids that are not fleet ids are skipped, counted and
// logged at warn level once.
func TestInvalidNodeIDs(t *testing.T) {
	id := identityOf(t, llmdiagv1.Engine_ENGINE_VLLM)
	fake := newFakeProm(t, map[string]canned{id.expr: {Status: http.StatusOK, Body: vectorBody(testNow, []fakeSample{
		{[]string{"instance", "ok-1"}, "1767225599"},
		{[]string{"instance", "bad id"}, "1767225599"},
		{[]string{"instance", strings.Repeat("x", 129)}, "1767225599"},
		{[]string{"instance", "-leading-dash"}, "1767225599"},
	})}})
	var logs testkit.SyncBuffer
	src, err := New(Config{URL: fake.URL}, slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		obs, err := src.Refresh(t.Context(), "5m")
		if err != nil {
			t.Fatal(err)
		}
		if len(obs) != 1 || obs[0].Node.ID != "ok-1" {
			t.Fatalf("observations %v, want ok-1 only", obs)
		}
		if n := src.InvalidNodeIDs(); n != 3 {
			t.Errorf("%d invalid ids counted, want 3", n)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"node ids that are not valid"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, logs.String())
	}
}

// TestDownNodes: a node with up == 0 reads down with Prometheus's last
// scrape error from the targets API; one whose series vanished reads down
// without it; without the targets API the error says it is not known.
func TestDownNodes(t *testing.T) {
	id := identityOf(t, llmdiagv1.Engine_ENGINE_VLLM)
	body := vectorBody(testNow, []fakeSample{
		{[]string{"instance", "live:8000", "model_name", "m"}, "1767225599"},
		{[]string{"instance", "down:8000"}, "-1"},
		{[]string{"instance", "gone:8000", "model_name", "m"}, "0"},
	})
	for _, withAPI := range []bool{true, false} {
		fake := newFakeProm(t, map[string]canned{id.expr: {Status: http.StatusOK, Body: body}})
		serve := fake.ServeHTTP
		var targets atomic.Int64
		fake.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/targets" && withAPI {
				targets.Add(1)
				if r.URL.Query().Get("state") != "active" {
					t.Errorf("targets asked without state=active: %s", r.URL)
				}
				w.Write([]byte(`{"status":"success","data":{"activeTargets":[
					{"labels":{"instance":"down:8000","job":"vllm"},"health":"down","lastError":"Get \"http://down:8000/metrics\": dial tcp: connection refused"},
					{"labels":{"instance":"live:8000","job":"vllm"},"health":"up","lastError":""}],"droppedTargets":[]}}`))
				return
			}
			serve(w, r)
		})
		obs, err := newTestSource(t, fake.URL, nil).Refresh(t.Context(), "5m")
		if err != nil {
			t.Fatal(err)
		}
		got := byID(obs)
		if len(got) != 3 || !got["live:8000"].Metrics.GetUp() || got["down:8000"].Metrics.GetUp() || got["gone:8000"].Metrics.GetUp() {
			t.Fatalf("with targets api %v: %v, want live up, down and gone down", withAPI, obs)
		}
		downErrs := strings.Join(got["down:8000"].Metrics.GetErrors(), "\n")
		want := "up == 0): Get \"http://down:8000/metrics\": dial tcp: connection refused"
		if !withAPI {
			want = "up == 0); its last error is not known"
		}
		if !strings.Contains(downErrs, want) {
			t.Errorf("with targets api %v: down errors %q, want %q", withAPI, downErrs, want)
		}
		if goneErrs := strings.Join(got["gone:8000"].Metrics.GetErrors(), "\n"); !strings.Contains(goneErrs, "no longer exporting") {
			t.Errorf("gone errors %q", goneErrs)
		}
		if got["gone:8000"].Node.Model != "m" {
			t.Errorf("gone model %q, want m", got["gone:8000"].Node.Model)
		}
		if withAPI && targets.Load() != 1 {
			t.Errorf("targets api asked %d times, want once", targets.Load())
		}
	}
}

// Queries that read no concept leave it zero, which is Queue's number:
// none of them may take the gauges' priority.
func TestPriorityOfConceptlessShapes(t *testing.T) {
	queue := priority(query{shape: shapeNode, concept: engine.Queue})
	for _, s := range []shape{shapeCreated, shapeDCGM, shapeRole, shapeEffects} {
		if p := priority(query{shape: s}); p <= queue {
			t.Errorf("%v query: priority %d, want after the queue's %d", s, p, queue)
		}
	}
	if r, e := priority(query{shape: shapeRole}), priority(query{shape: shapeEffects}); r <= e {
		t.Errorf("role query priority %d, want last (effects %d)", r, e)
	}
}
