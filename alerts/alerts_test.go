package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/alertmanager/template"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock that advances by every wait asked of it, at once:
// retries take no wall time, and the waits are recorded.
func fakeClock() *testkit.Clock { return testkit.NewClock(t0).SkipWaits() }

// fakeService answers ListNodes from nodes and DiagnoseNode from diags.
type fakeService struct {
	mu       sync.Mutex
	nodes    []*llmdiagv1.Node
	lists    int
	diagCall int
	listErr  error
}

func (f *fakeService) ListNodes(ctx context.Context, r *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return connect.NewResponse(&llmdiagv1.ListNodesResponse{Nodes: f.nodes}), nil
}

func (f *fakeService) DiagnoseNode(ctx context.Context, r *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	f.mu.Lock()
	f.diagCall++
	f.mu.Unlock()
	if r.Msg.GetNode() != "glm-4.6-0" {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q: not found", r.Msg.GetNode()))
	}
	d := overloaded()
	if r.Msg.GetLanguage() == llmdiagv1.Language_LANGUAGE_ZH {
		d = overloadedZH()
	}
	return connect.NewResponse(&llmdiagv1.DiagnoseNodeResponse{Diagnosis: d}), nil
}

func overloaded() *llmdiagv1.Diagnosis {
	return &llmdiagv1.Diagnosis{
		Node: "glm-4.6-0", Model: "zai-org/GLM-4.6", Engine: llmdiagv1.Engine_ENGINE_SGLANG, Window: "5m",
		Status: llmdiagv1.Status_STATUS_CRIT, RootCause: llmdiagv1.Cause_CAUSE_OVERLOADED,
		Summary:         "Overloaded: 903 requests queued for 2m30s without draining, against 48 running (ratio 18.8); KV 62% is below the preemption point, so the batch is full, not the memory.",
		Evidence:        []string{"queue 903 (max 970), above queue_saturated (5) for 2m30s", "queue/running 18.8, at or above queue_running_ratio_crit (1)", "KV pressure 0.62 < kv_warn 0.85: not memory-bound", "aborted 1.3 request/s: clients give up waiting <2 min>"},
		Recommendations: []string{"Add replicas or route traffic away from glm-4.6-0 (routable: false)", "Raise max_running_requests only if KV has room & TTFT allows"},
		Routable:        false, LoadScore: 1, Confidence: 0.9, Language: llmdiagv1.Language_LANGUAGE_EN,
	}
}

func overloadedZH() *llmdiagv1.Diagnosis {
	d := overloaded()
	d.Summary = "过载：903 个请求排队 2分30秒未消化，运行中 48 个（比值 18.8）；KV 62% 低于抢占点，满的是批次而不是显存。"
	d.Evidence = []string{"队列 903（最高 970），高于 queue_saturated (5) 已 2分30秒", "队列/运行 18.8，不低于 queue_running_ratio_crit (1)"}
	d.Recommendations = []string{"增加副本或把流量从 glm-4.6-0 移走（routable: false）"}
	d.Language = llmdiagv1.Language_LANGUAGE_ZH
	return d
}

func fleet() []*llmdiagv1.Node {
	return []*llmdiagv1.Node{
		{Id: "glm-4.6-0", Url: "http://127.0.0.1:9101/metrics"},
		{Id: "glm-4.6-1", Url: "http://127.0.0.1:9102/metrics"},
		{Id: "10.0.0.7:8000"}, // read from Prometheus: the id is the instance
		{Id: "plain", Url: "http://plain.example/metrics"},
	}
}

func alert(labels map[string]string) template.Alert {
	return template.Alert{Status: "firing", Labels: labels, Annotations: template.KV{"summary": "Sustained queueing"}, StartsAt: t0, Fingerprint: "fp-" + labels["alertname"] + labels["instance"]}
}

func TestMatch(t *testing.T) {
	svc := &fakeService{nodes: fleet()}
	ni := &nodeIndex{svc: svc, clock: fakeClock(), ttl: time.Minute, max: 100, timeout: time.Second}
	idx, err := ni.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	labels := []string{"instance", "node"}
	for _, tc := range []struct {
		name   string
		labels template.KV
		node   string
		label  string
	}{
		{"instance is a scraped node's host:port", template.KV{"instance": "127.0.0.1:9101"}, "glm-4.6-0", "instance"},
		{"instance is a node id (Prometheus mode)", template.KV{"instance": "10.0.0.7:8000"}, "10.0.0.7:8000", "instance"},
		{"instance names the URL's host with the default port", template.KV{"instance": "plain.example:80"}, "plain", "instance"},
		{"instance is a URL", template.KV{"instance": "http://127.0.0.1:9102/metrics"}, "glm-4.6-1", "instance"},
		{"node label when instance is unknown", template.KV{"instance": "127.0.0.1:1", "node": "glm-4.6-1"}, "glm-4.6-1", "node"},
		{"unknown node", template.KV{"instance": "127.0.0.1:1"}, "", "instance"},
		{"no node label at all", template.KV{"alertname": "Watchdog"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := idx.match(tc.labels, labels)
			if m.node != tc.node || m.label != tc.label {
				t.Errorf("match(%v) = node %q label %q, want node %q label %q", tc.labels, m.node, m.label, tc.node, tc.label)
			}
		})
	}
}

func TestNodeIndexIsCachedForItsTTL(t *testing.T) {
	svc := &fakeService{nodes: fleet()}
	clk := fakeClock()
	ni := &nodeIndex{svc: svc, clock: clk, ttl: 10 * time.Second, max: 2, timeout: time.Second}
	for range 3 {
		if _, err := ni.get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if svc.lists != 1 {
		t.Errorf("ListNodes called %d times within the TTL, want 1", svc.lists)
	}
	clk.Add(10 * time.Second)
	svc.listErr = connect.NewError(connect.CodeUnavailable, fmt.Errorf("down"))
	idx, err := ni.get(context.Background())
	if err != nil || svc.lists != 2 {
		t.Fatalf("after the TTL: err %v, lists %d; want the old index and a second list", err, svc.lists)
	}
	if len(idx.byID) != 2 {
		t.Errorf("index holds %d nodes, want the bound, 2", len(idx.byID))
	}
}

func TestDedup(t *testing.T) {
	d := newDedup(time.Minute, 3)
	if !d.admit("a/firing", t0) || d.admit("a/firing", t0.Add(59*time.Second)) {
		t.Fatal("want the first admitted and the repeat within the window refused")
	}
	if !d.admit("a/resolved", t0.Add(time.Second)) {
		t.Error("another status is another key")
	}
	if !d.admit("a/firing", t0.Add(time.Minute)) {
		t.Error("want a key admitted again once the window has passed")
	}
	// Bounded: a fourth key within the window evicts the oldest.
	d = newDedup(time.Hour, 3)
	for i, k := range []string{"k1", "k2", "k3", "k4"} {
		d.admit(k, t0.Add(time.Duration(i)*time.Second))
	}
	if d.len() != 3 {
		t.Errorf("dedup holds %d keys, want its bound 3", d.len())
	}
	if !d.admit("k1", t0.Add(5*time.Second)) {
		t.Error("the evicted oldest key should be new again")
	}
	if d.admit("k4", t0.Add(6*time.Second)) {
		t.Error("the newest key should still be remembered")
	}
	d.forget("k4")
	if !d.admit("k4", t0.Add(7*time.Second)) {
		t.Error("a forgotten key should be new again")
	}
}

// newTestReceiver is a receiver with a fake service and clock, sinks
// pointed at url, and a log written to logs.
func newTestReceiver(t *testing.T, sinks []Sink, opts Options) (*Receiver, *fakeService, *prometheus.Registry, *testkit.SyncBuffer) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc := &fakeService{nodes: fleet()}
	reg := prometheus.NewRegistry()
	if opts.Clock == nil {
		opts.Clock = fakeClock()
	}
	opts.Jitter = func() float64 { return 0.5 }
	r, err := New(svc, sinks, log, reg, &http.Client{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r, svc, reg, logs
}

func post(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/alertmanager", strings.NewReader(body)))
	return rec
}

func message(alerts ...template.Alert) string {
	b, _ := json.Marshal(Message{Version: "4", GroupKey: "{}:{alertname=\"x\"}", Data: &template.Data{Receiver: "llmdiag", Status: "firing", Alerts: alerts}})
	return string(b)
}

func TestValidation(t *testing.T) {
	r, _, _, _ := newTestReceiver(t, []Sink{JSONSink("http://127.0.0.1:1/hook")}, Options{MaxAlerts: 2, MaxBodyBytes: 2048})
	ok := alert(map[string]string{"alertname": "A", "instance": "127.0.0.1:9101"})
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"wrong version", `{"version":"3","alerts":[{"status":"firing","labels":{"a":"b"}}]}`, 400, "version"},
		{"no alerts", `{"version":"4","alerts":[]}`, 400, "alerts: none"},
		{"too many alerts", message(ok, ok, ok), 400, "alerts: 3, more than the 2"},
		{"bad status", `{"version":"4","alerts":[{"status":"pending","labels":{"a":"b"}}]}`, 400, "alerts[0].status"},
		{"no labels", `{"version":"4","alerts":[{"status":"firing"}]}`, 400, "alerts[0].labels"},
		{"not JSON", `version=4`, 400, "body: not Alertmanager's webhook JSON"},
		{"body too large", `{"version":"4","receiver":"` + strings.Repeat("x", 4096) + `"}`, 413, "more than 2048 bytes"},
		{"accepted", message(ok), 202, `"accepted":1`},
		{"duplicate", message(ok), 202, `"accepted":0,"duplicates":1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(t, r, tc.body)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tc.code, tc.want)
			}
		})
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/alertmanager", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", rec.Code)
	}
	for outcome, want := range map[string]float64{"accepted": 2, "invalid": 6, "too_large": 1, "queue_full": 0} {
		if got := value(r.m.messages.WithLabelValues(outcome)); got != want {
			t.Errorf("llmdiag_alertmanager_messages_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

func TestDedupKey(t *testing.T) {
	a := alert(map[string]string{"alertname": "A", "instance": "127.0.0.1:9101"})
	resent := a
	resent.Annotations = template.KV{"summary": "changed"}
	resolved := a
	resolved.Status, resolved.EndsAt = "resolved", t0.Add(time.Minute)
	refired := a
	refired.StartsAt = t0.Add(2 * time.Minute)
	noFP := a
	noFP.Fingerprint = ""
	if dedupKey(a) != dedupKey(resent) {
		t.Error("a resend of the same alert must be a duplicate")
	}
	for name, b := range map[string]template.Alert{"resolved": resolved, "fired again": refired, "without fingerprint": noFP} {
		if dedupKey(a) == dedupKey(b) {
			t.Errorf("%s: same key as the first firing", name)
		}
	}
}

func TestIntakeQueueFullRefusesAndForgets(t *testing.T) {
	r, _, _, logs := newTestReceiver(t, []Sink{JSONSink("http://127.0.0.1:1/hook")}, Options{IntakeQueue: 1})
	a := alert(map[string]string{"alertname": "A", "instance": "127.0.0.1:9101"})
	b := alert(map[string]string{"alertname": "B", "instance": "127.0.0.1:9101"})
	if rec := post(t, r, message(a)); rec.Code != 202 {
		t.Fatalf("first: %d", rec.Code)
	}
	rec := post(t, r, message(b)) // Run is not running: the queue of 1 is full
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "intake queue full (1 messages") {
		t.Errorf("got %d %q, want 503 naming the intake queue's limit", rec.Code, rec.Body.String())
	}
	if !strings.Contains(logs.String(), `limit="intake queue"`) {
		t.Errorf("log does not name the limit:\n%s", logs)
	}
	<-r.intake
	if rec := post(t, r, message(b)); rec.Code != 202 || !strings.Contains(rec.Body.String(), `"accepted":1`) {
		t.Errorf("after a refusal the alert must be taken when resent: %d %q", rec.Code, rec.Body.String())
	}
}

// sinkServer records the bodies it is sent; answers, when set, are the
// status codes of the first requests.
type sinkServer struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	answers []int
}

func newSinkServer(t *testing.T, answers ...int) *sinkServer {
	s := &sinkServer{answers: answers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		code := 200
		if len(s.answers) > 0 {
			code, s.answers = s.answers[0], s.answers[1:]
		}
		s.mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprint(w, http.StatusText(code))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sinkServer) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

func run(t *testing.T, r *Receiver) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestEnrichesAndForwards(t *testing.T) {
	js := newSinkServer(t)
	tx := newSinkServer(t)
	text, err := TextSink(tx.URL+"/hook", "feishu")
	if err != nil {
		t.Fatal(err)
	}
	r, svc, reg, _ := newTestReceiver(t, []Sink{JSONSink(js.URL + "/hook"), text}, Options{
		Runbook: func(c llmdiagv1.Cause) string { return "https://llmdiag.example/runbooks/" + causeName(c) },
	})
	run(t, r)
	msg := message(
		alert(map[string]string{"alertname": "LLMDiagOverloaded", "instance": "127.0.0.1:9101"}),
		alert(map[string]string{"alertname": "LLMDiagQueueing", "instance": "127.0.0.1:9101"}),
		alert(map[string]string{"alertname": "Other", "instance": "10.9.9.9:80"}),
	)
	if rec := post(t, r, msg); rec.Code != 202 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	testkit.Eventually(t, 10*time.Second, "three notifications per sink", func() bool {
		return len(js.Bodies()) == 3 && len(tx.Bodies()) == 3
	})
	var got []jsonMessage
	for _, b := range js.Bodies() {
		var m jsonMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if got[0].Node != "glm-4.6-0" || !bytes.Contains(got[0].Diagnosis, []byte(`"rootCause":"CAUSE_OVERLOADED"`)) ||
		got[0].RunbookURL != "https://llmdiag.example/runbooks/OVERLOADED" {
		t.Errorf("first notification: node %q runbook %q diagnosis %s", got[0].Node, got[0].RunbookURL, got[0].Diagnosis)
	}
	if got[2].Node != "" || got[2].Diagnosis != nil || got[2].Note != `llmdiag knows no node instance="10.9.9.9:80", so no verdict is attached.` {
		t.Errorf("unmatched alert: node %q note %q", got[2].Node, got[2].Note)
	}
	if !strings.Contains(string(tx.Bodies()[0]), "过载") || !strings.Contains(string(tx.Bodies()[2]), "llmdiag 不认识节点") {
		t.Errorf("text sink not in Chinese: %s / %s", tx.Bodies()[0], tx.Bodies()[2])
	}
	// One diagnosis per node and language, not per alert.
	if svc.diagCall != 2 {
		t.Errorf("DiagnoseNode called %d times, want 2 (glm-4.6-0 in English and Chinese)", svc.diagCall)
	}
	if v := value(r.m.unmatched); v != 1 {
		t.Errorf("unmatched = %v, want 1", v)
	}
	testkit.Eventually(t, 5*time.Second, "delivered counted", func() bool {
		return value(r.m.delivered.WithLabelValues("json")) == 3
	})
	_ = reg
}

func TestRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		name        string
		answers     []int
		opts        Options
		wantPosts   int
		wantWaits   []time.Duration
		delivered   float64
		failed      float64
		wantLimit   string
		wantRetries float64
	}{
		{"503 twice then 200", []int{503, 503}, Options{}, 3,
			[]time.Duration{375 * time.Millisecond, 750 * time.Millisecond}, 1, 0, "", 2},
		{"429 is retried", []int{429}, Options{}, 2, []time.Duration{375 * time.Millisecond}, 1, 0, "", 1},
		{"400 is final", []int{400}, Options{}, 1, nil, 0, 1, "final answer", 0},
		{"attempts bounded", []int{500, 500, 500, 500}, Options{MaxAttempts: 3}, 3,
			[]time.Duration{375 * time.Millisecond, 750 * time.Millisecond}, 0, 1, "max attempts (3)", 2},
		{"total time bounded", []int{500, 500, 500, 500, 500, 500, 500}, Options{MaxAttempts: 10, MaxElapsed: 5 * time.Second, BackoffMax: 2 * time.Second}, 5,
			// 4.125s waited; the next 1.5s would pass 5s.
			[]time.Duration{375 * time.Millisecond, 750 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond}, 0, 1, "max elapsed (5s)", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newSinkServer(t, tc.answers...)
			clk := fakeClock()
			tc.opts.Clock = clk
			r, _, _, logs := newTestReceiver(t, []Sink{JSONSink(srv.URL + "/hook")}, tc.opts)
			s := r.senders[0]
			s.push(&Notification{Alert: alert(map[string]string{"alertname": "A"}), Note: "n"})
			q, _ := s.pop()
			s.deliver(context.Background(), q)
			if n := len(srv.Bodies()); n != tc.wantPosts {
				t.Errorf("%d posts, want %d", n, tc.wantPosts)
			}
			if w := clk.Waits(); fmt.Sprint(w) != fmt.Sprint(tc.wantWaits) {
				t.Errorf("waits %v, want %v (backoff 500ms·2^n, jitter 0.5 → ¾ of it)", w, tc.wantWaits)
			}
			if d, f, rt := value(r.m.delivered.WithLabelValues("json")), value(r.m.failed.WithLabelValues("json")), value(r.m.retries.WithLabelValues("json")); d != tc.delivered || f != tc.failed || rt != tc.wantRetries {
				t.Errorf("delivered %v failed %v retries %v, want %v %v %v", d, f, rt, tc.delivered, tc.failed, tc.wantRetries)
			}
			if tc.wantLimit != "" && !strings.Contains(logs.String(), tc.wantLimit) {
				t.Errorf("log does not say %q:\n%s", tc.wantLimit, logs)
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	for _, j := range []float64{0, 0.999} {
		s := &sender{opts: Options{BackoffBase: time.Second, BackoffMax: 8 * time.Second, Jitter: func() float64 { return j }}}
		for attempt, full := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
			got := s.backoff(attempt + 1)
			if got < full/2 || got > full {
				t.Errorf("jitter %v attempt %d: %v, want within [%v, %v]", j, attempt+1, got, full/2, full)
			}
		}
	}
}

func TestSinkQueueDropsOldest(t *testing.T) {
	r, _, _, logs := newTestReceiver(t, []Sink{JSONSink("http://127.0.0.1:1/hook")}, Options{SinkQueue: 2})
	s := r.senders[0]
	for _, name := range []string{"first", "second", "third"} {
		s.push(&Notification{Alert: alert(map[string]string{"alertname": name}), Note: "n"})
	}
	if v := value(r.m.dropped.WithLabelValues("json", "queue")); v != 1 {
		t.Errorf("dropped{limit=queue} = %v, want 1", v)
	}
	if v := value(r.m.queueLen.WithLabelValues("json")); v != 2 {
		t.Errorf("queue length %v, want 2", v)
	}
	q, _ := s.pop()
	if !bytes.Contains(q.body, []byte(`"alertname":"second"`)) {
		t.Errorf("head of the queue is %s, want the second (the oldest dropped)", q.body)
	}
	if !strings.Contains(logs.String(), `limit="sink queue" capacity=2`) {
		t.Errorf("log does not name the limit:\n%s", logs)
	}
}

func TestWebhookURLsNeverLogged(t *testing.T) {
	const secret = "T0001/B0001/s3cr3tW3bh00kT0k3n"
	failing := newSinkServer(t, 500, 500, 500, 500, 500)
	closed := "http://" + testkit.ClosedAddr(t)
	r, _, reg, logs := newTestReceiver(t, []Sink{
		SlackSink(failing.URL + "/services/" + secret),
		JSONSink(closed + "/services/" + secret + "?token=" + secret),
	}, Options{MaxAttempts: 2})
	run(t, r)
	if rec := post(t, r, message(alert(map[string]string{"alertname": "A", "instance": "127.0.0.1:9101"}))); rec.Code != 202 {
		t.Fatal(rec.Code)
	}
	testkit.Eventually(t, 10*time.Second, "both deliveries given up", func() bool {
		return value(r.m.failed.WithLabelValues("slack")) == 1 && value(r.m.failed.WithLabelValues("json")) == 1
	})
	if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "500 Internal Server Error") {
		t.Errorf("log lacks the causes:\n%s", logs)
	}
	if strings.Contains(logs.String(), secret) || strings.Contains(logs.String(), "/services/") {
		t.Errorf("a webhook URL reached the log:\n%s", logs)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if strings.Contains(mf.String(), secret) {
			t.Errorf("a webhook URL reached metric %s", mf.GetName())
		}
	}
	if _, err := New(&fakeService{}, []Sink{JSONSink("::not a url " + secret)}, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), &http.Client{}, Options{}); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("bad URL: err %v, want an error without the URL", err)
	}
}

func TestRenderGoldens(t *testing.T) {
	a := alert(map[string]string{"alertname": "LLMDiagOverloaded", "instance": "127.0.0.1:9101", "severity": "critical", "engine": "sglang"})
	a.Annotations["runbook_url"] = "http://llmdiag.example:8080/runbooks/OVERLOADED"
	a.GeneratorURL = "http://prometheus.example:9090/graph?g0.expr=llmdiag%3Aqueueing+%3D%3D+1"
	a.Fingerprint = "5ef77f1f3a2b6c01"
	base := Notification{Alert: a, Receiver: "llmdiag", GroupKey: `{}:{alertname="LLMDiagOverloaded"}`, ExternalURL: "http://alertmanager.example:9093"}
	withVerdict := base
	withVerdict.Node, withVerdict.Diagnosis, withVerdict.RunbookURL = "glm-4.6-0", overloaded(), "http://llmdiag.example:8080/runbooks/OVERLOADED"
	zh := withVerdict
	zh.Diagnosis = overloadedZH()
	unmatched := base
	unmatched.Alert.Labels = template.KV{"alertname": "LLMDiagOverloaded", "instance": "10.9.9.9:80", "severity": "critical"}
	unmatched.Alert.Fingerprint = "9c0d2e44b1a7f310"
	unmatched.Note = noteUnmatched(llmdiagv1.Language_LANGUAGE_EN, match{label: "instance", value: "10.9.9.9:80"}, nil)
	unmatchedZH := unmatched
	unmatchedZH.Note = noteUnmatched(llmdiagv1.Language_LANGUAGE_ZH, match{label: "instance", value: "10.9.9.9:80"}, nil)
	text := func(format string) func(*Notification) ([]byte, error) {
		return func(n *Notification) ([]byte, error) { return RenderText(n, format) }
	}
	for _, tc := range []struct {
		golden string
		render func(*Notification) ([]byte, error)
		n      Notification
	}{
		{"slack.json", RenderSlack, withVerdict},
		{"slack-unmatched.json", RenderSlack, unmatched},
		{"generic.json", RenderJSON, withVerdict},
		{"generic-unmatched.json", RenderJSON, unmatched},
		{"feishu.json", text("feishu"), zh},
		{"wecom.json", text("wecom"), zh},
		{"dingtalk-unmatched.json", text("dingtalk"), unmatchedZH},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			b, err := tc.render(&tc.n)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, b, "", "  "); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b)
			}
			out.WriteByte('\n')
			testkit.Golden(t, filepath.Join("testdata", tc.golden), out.Bytes())
		})
	}
}

func TestTextIsCutToTheToolsLimit(t *testing.T) {
	d := overloadedZH()
	d.Summary = strings.Repeat("过载", 2000)
	b, err := RenderText(&Notification{Alert: alert(map[string]string{"alertname": "A"}), Node: "n", Diagnosis: d}, "wecom")
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Text struct{ Content string } }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Text.Content) > 2048 || !strings.HasSuffix(m.Text.Content, "…") {
		t.Errorf("wecom text is %d bytes (want ≤ 2048, cut with …)", len(m.Text.Content))
	}
	if _, err := TextSink("http://x/", "telegram"); err == nil {
		t.Error("unknown text format accepted")
	}
}

// value reads a counter or gauge (client_golang's testutil would add a
// module to go.mod).
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
