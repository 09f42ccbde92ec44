package slackcmd_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/slack-go/slack"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/slackcmd"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// fakeService answers from fixtures; with block set, every call waits for
// it to be closed (or its context to end).
type fakeService struct {
	block chan struct{}
	nodes []*llmdiagv1.Node
	cmp   *llmdiagv1.ComparePercentilesResponse
	mu    sync.Mutex
	calls int
}

func (f *fakeService) wait(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.block == nil {
		return nil
	}
	select {
	case <-f.block:
		return nil
	case <-ctx.Done():
		return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
	}
}

func (f *fakeService) ListNodes(ctx context.Context, _ *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return connect.NewResponse(&llmdiagv1.ListNodesResponse{Nodes: f.nodes}), nil
}

func (f *fakeService) DiagnoseNode(ctx context.Context, req *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	if req.Msg.GetNode() != "deepseek-v4-0" {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q: not found", req.Msg.GetNode()))
	}
	d := diagnose.Diagnose(diagnosetest.SeedInput(), diagnose.DefaultThresholds(), req.Msg.GetLanguage())
	d.Node = "deepseek-v4-0"
	d.Staleness = durationpb.New(15 * time.Second) // as its data-age finding says
	return connect.NewResponse(&llmdiagv1.DiagnoseNodeResponse{Diagnosis: d}), nil
}

func (f *fakeService) ComparePercentiles(ctx context.Context, req *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	if req.Msg.GetMetric() != llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT || req.Msg.GetGroupBy() != llmdiagv1.GroupBy_GROUP_BY_MODEL {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("label: required with GROUP_BY_LABEL"))
	}
	return connect.NewResponse(f.cmp), nil
}

// fleet is a small fleet in every status, one node id trying a mention.
func fleet() []*llmdiagv1.Node {
	n := func(id, model string, e llmdiagv1.Engine, s llmdiagv1.Status, c llmdiagv1.Cause, load float64, routable bool) *llmdiagv1.Node {
		return &llmdiagv1.Node{Id: id, Model: model, Engine: e, Status: s, RootCause: c, LoadScore: load, Routable: routable}
	}
	v, sg := llmdiagv1.Engine_ENGINE_VLLM, llmdiagv1.Engine_ENGINE_SGLANG
	return []*llmdiagv1.Node{
		n("<!channel>", "x&y", v, llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, 0, false),
		n("deepseek-v4-0", "deepseek-v4", v, llmdiagv1.Status_STATUS_WARN, llmdiagv1.Cause_CAUSE_DECODE_BOUND, 0.42, true),
		n("deepseek-v4-1", "deepseek-v4", v, llmdiagv1.Status_STATUS_WARN, llmdiagv1.Cause_CAUSE_DECODE_BOUND, 0.47, true),
		n("glm-4.6-0", "glm-4.6", sg, llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY, 0.31, true),
		n("kimi-k2.6-0", "kimi-k2.6", v, llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_OVERLOADED, 1.6, false),
		n("kimi-k2.6-1", "kimi-k2.6", v, llmdiagv1.Status_STATUS_DOWN, llmdiagv1.Cause_CAUSE_TARGET_DOWN, 0, false),
	}
}

func pct(q, v, lo, hi float64) *llmdiagv1.Percentile {
	return &llmdiagv1.Percentile{Quantile: q, Value: v, LowerBound: lo, UpperBound: hi}
}

// comparison is TTFT by model: a clear winner, one within resolution of
// the median, an outlier, and a group without observations.
func comparison() *llmdiagv1.ComparePercentilesResponse {
	val := func(p *llmdiagv1.Percentile, rank uint32, ratio float64, within bool) *llmdiagv1.CompareValue {
		return &llmdiagv1.CompareValue{Percentile: p, Rank: rank, RatioToMedian: ratio, WithinResolution: within}
	}
	return &llmdiagv1.ComparePercentilesResponse{
		Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Window: "5m", Quantiles: []float64{0.5, 0.95, 0.99},
		Staleness: durationpb.New(2 * time.Second),
		Rows: []*llmdiagv1.CompareRow{
			{Subject: "deepseek-v4", Nodes: []string{"deepseek-v4-0", "deepseek-v4-1"}, Count: 412, TailRatio: 6.2, Values: []*llmdiagv1.CompareValue{
				val(pct(0.5, 0.31, 0.25, 0.5), 2, 1, true), val(pct(0.95, 1.6, 1, 2.5), 2, 1, true), val(pct(0.99, 1.92, 1, 2.5), 2, 1, true)}},
			{Subject: "glm-4.6", Nodes: []string{"glm-4.6-0"}, Count: 980, TailRatio: 5.1, Values: []*llmdiagv1.CompareValue{
				val(pct(0.5, 0.082, 0.08, 0.1), 1, 0.26, false), val(pct(0.95, 0.35, 0.25, 0.5), 1, 0.22, false), val(pct(0.99, 0.42, 0.25, 0.5), 1, 0.22, false)}},
			{Subject: "kimi-k2.6", Nodes: []string{"kimi-k2.6-0", "kimi-k2.6-1"}, Count: 120, TailRatio: 3.8, Outlier: true, Values: []*llmdiagv1.CompareValue{
				val(pct(0.5, 1.3, 1, 2.5), 3, 4.2, false), val(pct(0.95, 4.4, 2.5, 5), 3, 2.75, false), val(pct(0.99, 4.9, 2.5, 5), 3, 2.55, false)}},
			{Subject: "qwen3", Nodes: []string{"qwen3-0"}, Note: "no requests in the window", Values: []*llmdiagv1.CompareValue{
				val(pct(0.5, math.NaN(), 0, 0), 0, 0, false), val(pct(0.95, math.NaN(), 0, 0), 0, 0, false), val(pct(0.99, math.NaN(), 0, 0), 0, 0, false)}},
		},
	}
}

// rig is a Handler on a clock the test sets, with its log kept.
type rig struct {
	h     *slackcmd.Handler
	clock *testkit.Clock
	log   *testkit.SyncBuffer
	svc   *fakeService
}

// newRig builds a Handler; edit changes its Config. The clock starts at the
// wall clock's second, since slack-go checks timestamps against the wall
// clock too.
func newRig(t *testing.T, svc *fakeService, edit func(*slackcmd.Config)) *rig {
	t.Helper()
	r := &rig{clock: testkit.NewClock(time.Now().Truncate(time.Second)), log: &testkit.SyncBuffer{}, svc: svc}
	cfg := slackcmd.Config{
		Service: svc,
		Secret:  func() (string, error) { return secret, nil },
		Now:     r.clock.Now,
		Log:     slog.New(slog.NewTextHandler(r.log, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := slackcmd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	r.h = h
	return r
}

// form is a slash command's body, as Slack sends it.
func form(text, responseURL string) string {
	return url.Values{
		"token": {"legacy-unused"}, "team_id": {"T0001"}, "team_domain": {"example"},
		"channel_id": {"C2147483705"}, "channel_name": {"oncall"}, "user_id": {"U2147483697"},
		"user_name": {"oncall"}, "command": {"/llmdiag"}, "text": {text},
		"response_url": {responseURL}, "trigger_id": {"13345224609.738474920.8088930838d88f008e0"},
	}.Encode()
}

func sign(secret, ts, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:%s", ts, body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// signed is a request Slack would send at the rig's time.
func (r *rig) signed(body string) *http.Request {
	ts := strconv.FormatInt(r.clock.Now().Unix(), 10)
	req := httptest.NewRequest(http.MethodPost, "/slack/command", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sign(secret, ts, body))
	return req
}

func (r *rig) do(req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	return w
}

const hooks = "https://hooks.slack.com/commands/T0001/1234/abcd"

// TestSignatures: only requests Slack signed, once, recently, in the form
// it sends them, run a command; each refusal says why, and the log names
// neither the secret nor a signature.
func TestSignatures(t *testing.T) {
	body := form("nodes", hooks)
	for _, tc := range []struct {
		name string
		// req makes the request at the rig's time; a test may move it.
		req        func(r *rig) *http.Request
		edit       func(*slackcmd.Config)
		code       int
		reason     string
		secondCode int // when set, the same request is sent again
		// again changes the request sent again.
		again func(*http.Request)
	}{
		{name: "valid", req: func(r *rig) *http.Request { return r.signed(body) }, code: 200},
		{name: "replayed", req: func(r *rig) *http.Request { return r.signed(body) }, code: 200, secondCode: 401, reason: "replayed request"},
		{name: "replayed a minute later", req: func(r *rig) *http.Request { return r.signed(body) }, code: 200, secondCode: 401, reason: "replayed request",
			again: func(req *http.Request) {}},
		{name: "replayed with the signature in capitals", req: func(r *rig) *http.Request { return r.signed(body) }, code: 200, secondCode: 401, reason: "replayed request",
			again: func(req *http.Request) {
				req.Header.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(req.Header.Get("X-Slack-Signature"), "v0=")))
			}},
		{name: "wrong secret", code: 401, reason: "invalid signature", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Header.Set("X-Slack-Signature", sign("another secret", req.Header.Get("X-Slack-Request-Timestamp"), body))
			return req
		}},
		{name: "body changed after signing", code: 401, reason: "invalid signature", req: func(r *rig) *http.Request {
			req := r.signed(body)
			changed := form("diagnose deepseek-v4-0", hooks)
			req.Body, req.ContentLength = io.NopCloser(strings.NewReader(changed)), int64(len(changed))
			return req
		}},
		{name: "timestamp changed after signing", code: 401, reason: "invalid signature", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(r.clock.Now().Unix()-1, 10))
			return req
		}},
		{name: "malformed signature", code: 401, reason: "invalid signature", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Header.Set("X-Slack-Signature", "v0=not-hex")
			return req
		}},
		{name: "stale timestamp", code: 401, reason: "stale timestamp", req: func(r *rig) *http.Request {
			req := r.signed(body) // signed now, arriving 5m1s later
			r.clock.Add(5*time.Minute + time.Second)
			return req
		}},
		{name: "timestamp from the future", code: 401, reason: "stale timestamp", req: func(r *rig) *http.Request {
			r.clock.Add(10 * time.Minute)
			req := r.signed(body)
			r.clock.Add(-10 * time.Minute)
			return req
		}},
		{name: "missing signature", code: 401, reason: "missing X-Slack-Signature", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Header.Del("X-Slack-Signature")
			return req
		}},
		{name: "missing timestamp", code: 401, reason: "missing X-Slack-Signature or X-Slack-Request-Timestamp", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Header.Del("X-Slack-Request-Timestamp")
			return req
		}},
		{name: "GET", code: 405, reason: "method GET not allowed", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Method = http.MethodGet
			return req
		}},
		{name: "JSON", code: 415, reason: "application/x-www-form-urlencoded", req: func(r *rig) *http.Request {
			req := r.signed(body)
			req.Header.Set("Content-Type", "application/json")
			return req
		}},
		{name: "oversized body", code: 413, reason: "body over the 1024-byte limit", edit: func(c *slackcmd.Config) { c.MaxBodyBytes = 1024 }, req: func(r *rig) *http.Request {
			return r.signed(form(strings.Repeat("x", 2000), hooks))
		}},
		{name: "secret unreadable", code: 503, reason: "signing secret unavailable", edit: func(c *slackcmd.Config) {
			c.Secret = func() (string, error) { return "", errors.New("open /etc/llmdiag/slack-secret: permission denied") }
		}, req: func(r *rig) *http.Request { return r.signed(body) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &fakeService{nodes: fleet()}
			r := newRig(t, svc, tc.edit)
			req := tc.req(r)
			sig := req.Header.Get("X-Slack-Signature")
			first, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(first))
			w := r.do(req)
			if tc.secondCode != 0 {
				if w.Code != tc.code {
					t.Fatalf("first: %d %s", w.Code, w.Body)
				}
				again := req.Clone(context.Background())
				again.Body = io.NopCloser(bytes.NewReader(first))
				if tc.again != nil {
					r.clock.Add(time.Minute)
					tc.again(again)
				}
				w = r.do(again)
				tc.code = tc.secondCode
			}
			if w.Code != tc.code {
				t.Fatalf("answered %d %q, want %d", w.Code, w.Body, tc.code)
			}
			if tc.code == 200 {
				if svc.calls != 1 || !strings.Contains(w.Body.String(), "deepseek-v4-0") {
					t.Errorf("calls %d, answer %s", svc.calls, w.Body)
				}
				return
			}
			if !strings.Contains(w.Body.String(), tc.reason) {
				t.Errorf("answer %q lacks %q", w.Body, tc.reason)
			}
			wantCalls := 0
			if tc.secondCode != 0 {
				wantCalls = 1 // the first, not the replay
			}
			if svc.calls != wantCalls {
				t.Errorf("%d calls, want %d: a refused request ran its command", svc.calls, wantCalls)
			}
			log := r.log.String()
			if !strings.Contains(log, "slack command refused") || !strings.Contains(log, tc.reason[:10]) {
				t.Errorf("refusal not logged with its reason:\n%s", log)
			}
			for _, s := range []string{secret, strings.TrimPrefix(sig, "v0=")} {
				if s != "" && strings.Contains(log+w.Body.String(), s) {
					t.Errorf("log or answer shows a secret or signature %q:\n%s", s, log)
				}
			}
		})
	}
}

// TestReplaySetBounded: the signatures remembered are bounded; while the
// set is full of live ones requests are refused, naming the limit, and
// once their timestamps are stale the set takes new ones again.
func TestReplaySetBounded(t *testing.T) {
	r := newRig(t, &fakeService{nodes: fleet()}, func(c *slackcmd.Config) {
		c.MaxReplayEntries = 2
		c.Tolerance = 10 * time.Second
	})
	for i, want := range []int{200, 200, 503} {
		w := r.do(r.signed(form("nodes", hooks+strconv.Itoa(i))))
		if w.Code != want {
			t.Fatalf("request %d: %d %s, want %d", i, w.Code, w.Body, want)
		}
		if want == 503 && !strings.Contains(w.Body.String(), "MaxReplayEntries") {
			t.Errorf("refusal does not name the limit: %s", w.Body)
		}
	}
	r.clock.Add(11 * time.Second)
	if w := r.do(r.signed(form("nodes", hooks))); w.Code != 200 {
		t.Fatalf("after the tolerance: %d %s", w.Code, w.Body)
	}
}

// checkBlockKit fails the test unless b is a message Slack accepts: valid
// JSON that slack-go reads as a message of known blocks, within Slack's
// limits, every text object valid.
func checkBlockKit(t *testing.T, b []byte) slack.Message {
	t.Helper()
	var msg slack.Message
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatalf("not a Slack message: %v\n%s", err, b)
	}
	if msg.ResponseType != slack.ResponseTypeEphemeral {
		t.Errorf("response_type %q", msg.ResponseType)
	}
	if msg.Text == "" || utf8.RuneCountInString(msg.Text) > 3000 {
		t.Errorf("fallback text of %d characters", utf8.RuneCountInString(msg.Text))
	}
	bs := msg.Blocks.BlockSet
	if len(bs) == 0 || len(bs) > 50 {
		t.Errorf("%d blocks: want 1 to 50", len(bs))
	}
	text := func(o *slack.TextBlockObject, max int) {
		if o == nil {
			return
		}
		if err := o.Validate(); err != nil {
			t.Errorf("text %q: %v", o.Text, err)
		}
		if n := utf8.RuneCountInString(o.Text); n > max {
			t.Errorf("text of %d characters, Slack's limit is %d", n, max)
		}
	}
	for i, blk := range bs {
		switch blk := blk.(type) {
		case *slack.HeaderBlock:
			if blk.Text == nil || blk.Text.Type != slack.PlainTextType {
				t.Errorf("block %d: header needs plain_text", i)
			}
			text(blk.Text, 150)
		case *slack.SectionBlock:
			if blk.Text == nil && len(blk.Fields) == 0 {
				t.Errorf("block %d: section with neither text nor fields", i)
			}
			text(blk.Text, 3000)
			if len(blk.Fields) > 10 {
				t.Errorf("block %d: %d fields", i, len(blk.Fields))
			}
			for _, f := range blk.Fields {
				text(f, 2000)
			}
		case *slack.ContextBlock:
			if n := len(blk.ContextElements.Elements); n == 0 || n > 10 {
				t.Errorf("block %d: %d context elements", i, n)
			}
			for _, e := range blk.ContextElements.Elements {
				o, ok := e.(*slack.TextBlockObject)
				if !ok {
					t.Errorf("block %d: context element %T", i, e)
					continue
				}
				text(o, 3000)
			}
		case *slack.DividerBlock:
		default:
			t.Errorf("block %d: unexpected %T", i, blk)
		}
	}
	return msg
}

// TestAnswers: each command's answer is a golden file, valid Block Kit
// within Slack's limits, saying what the person needs first.
func TestAnswers(t *testing.T) {
	ok := fleet()[3]
	for _, tc := range []struct {
		golden, text string
		nodes        []*llmdiagv1.Node
		want         []string
	}{
		{"diagnose.en.json", "diagnose deepseek-v4-0", nil, []string{
			":large_yellow_circle: deepseek-v4-0 · WARN · Decode-bound", "Not memory, not queueing", "*KV cache pressure* · OK (~30%) · Memory is not the bottleneck", "*Evidence*", "*Recommendations*"}},
		{"diagnose.zh.json", "diagnose deepseek-v4-0 zh", nil, []string{
			"deepseek-v4-0 · 警告 · Decode 瓶颈", "不是显存不够", "*KV Cache 压力* · 正常（~30%） · 显存不是瓶颈", "*证据*", "*建议*"}},
		{"diagnose.unknown.json", "diagnose nosuch-0", nil, []string{"`diagnose nosuch-0`: node \\\"nosuch-0\\\": not found"}},
		{"nodes.json", "nodes", fleet(), []string{"Fleet: 6 nodes", "`&lt;!channel&gt;` · x&amp;y", "`kimi-k2.6-0` · kimi-k2.6 · vllm · load 1.60 · Overloaded · _not routable_"}},
		{"unhealthy.json", "unhealthy", fleet(), []string{"Unhealthy: 5 of 6", "1 CRIT, 1 DOWN, 2 WARN, 1 UNKNOWN, worst first\\n:red_circle: `kimi-k2.6-0`"}},
		{"unhealthy.none.json", "UNHEALTHY", []*llmdiagv1.Node{ok}, []string{"no unhealthy nodes (1 node, all OK)"}},
		{"compare.json", "compare ttft by model", nil, []string{"TTFT by model · 5m window", "*#1* `glm-4.6` · P50 82ms (80ms–100ms)", "≈", ":red_circle: *outlier*", "_no requests in the window_"}},
		{"compare.error.json", "compare e2e by label team", nil, []string{"`compare e2e by label team` failed (invalid_argument)"}},
		{"help.json", "help", nil, []string{"`/llmdiag diagnose NODE [zh]`", "`/llmdiag compare METRIC [by model|engine|node|label KEY]`"}},
		{"help.unknown.json", "restart everything", nil, []string{":grey_question: unknown command `restart`."}},
		{"help.bad-compare.json", "compare ttft by colour", nil, []string{"`by colour`: want model, engine, node or label KEY"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			r := newRig(t, &fakeService{nodes: tc.nodes, cmp: comparison()}, nil)
			w := r.do(r.signed(form(tc.text, hooks)))
			if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
			}
			checkBlockKit(t, w.Body.Bytes())
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, w.Body.Bytes(), "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			for _, s := range tc.want {
				if !strings.Contains(pretty.String(), s) {
					t.Errorf("answer lacks %q", s)
				}
			}
			if strings.Contains(pretty.String(), "<!channel>") {
				t.Error("a node id reached the answer unescaped")
			}
			testkit.Golden(t, filepath.Join("testdata", tc.golden), pretty.Bytes())
		})
	}
}

// TestLimits: a fleet far larger than a message can show stays within
// Slack's limits, and says that nodes were left out.
func TestLimits(t *testing.T) {
	var ns []*llmdiagv1.Node
	for i := range 900 {
		ns = append(ns, &llmdiagv1.Node{
			Id: fmt.Sprintf("node-with-a-rather-long-name-%04d", i), Model: strings.Repeat("m", 60),
			Engine: llmdiagv1.Engine_ENGINE_VLLM, Status: llmdiagv1.Status_STATUS_CRIT, RootCause: llmdiagv1.Cause_CAUSE_OVERLOADED,
		})
	}
	for _, text := range []string{"nodes", "unhealthy"} {
		r := newRig(t, &fakeService{nodes: ns}, nil)
		w := r.do(r.signed(form(text, hooks)))
		checkBlockKit(t, w.Body.Bytes())
		if !strings.Contains(w.Body.String(), "more (Slack's message limits)") {
			t.Errorf("%s: no note of the nodes left out", text)
		}
	}
}

// receiver is a response_url endpoint that fails the first failures posts.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	failures int
	posts    []string
	attempts int
}

func newReceiver(t *testing.T, failures int) *receiver {
	rc := &receiver{failures: failures}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.attempts++
		if rc.attempts <= rc.failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.posts = append(rc.posts, string(b))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() (int, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts, append([]string(nil), rc.posts...)
}

// TestSlowCommandGoesToResponseURL: a command slower than the inline
// deadline is acknowledged at once and its answer posted to the
// response_url, through a failed attempt.
func TestSlowCommandGoesToResponseURL(t *testing.T) {
	rc := newReceiver(t, 1)
	svc := &fakeService{block: make(chan struct{})}
	r := newRig(t, svc, func(c *slackcmd.Config) {
		c.InlineDeadline = 10 * time.Millisecond
		c.ResponseURLPrefix = rc.srv.URL + "/commands/"
		c.DeliveryBackoff = time.Millisecond
	})
	w := r.do(r.signed(form("diagnose deepseek-v4-0", rc.srv.URL+"/commands/T0001/1234/abcd")))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "Working on `diagnose deepseek-v4-0`") {
		t.Fatalf("acknowledgement: %d %s", w.Code, w.Body)
	}
	checkBlockKit(t, w.Body.Bytes())
	if n, _ := rc.got(); n != 0 {
		t.Fatalf("posted before the command finished")
	}
	close(svc.block)
	testkit.Eventually(t, 10*time.Second, "the answer at the response_url", func() bool {
		_, posts := rc.got()
		return len(posts) == 1
	})
	n, posts := rc.got()
	if n != 2 {
		t.Errorf("%d attempts, want 2 (one 503, then the answer)", n)
	}
	msg := checkBlockKit(t, []byte(posts[0]))
	if !strings.Contains(posts[0], "Decode-bound") || msg.ResponseType != "ephemeral" {
		t.Errorf("posted %s", posts[0])
	}
}

// TestResponseURLRefused: a response_url outside the allowed prefix gets
// nothing, and the person is told why the answer cannot follow.
func TestResponseURLRefused(t *testing.T) {
	rc := newReceiver(t, 0)
	for _, u := range []string{
		rc.srv.URL + "/commands/T0001/1234/abcd", // default prefix: hooks.slack.com only
		"https://hooks.slack.com.evil.example/x", // a host that starts like Slack's
		"",
	} {
		svc := &fakeService{block: make(chan struct{})}
		r := newRig(t, svc, func(c *slackcmd.Config) { c.InlineDeadline = 10 * time.Millisecond })
		w := r.do(r.signed(form("nodes", u)))
		if !strings.Contains(w.Body.String(), "its answer cannot follow") {
			t.Errorf("%q: answered %s", u, w.Body)
		}
		close(svc.block)
		r.h.Close() // waits for the command to end
		if n, _ := rc.got(); n != 0 {
			t.Errorf("%q: %d posts to a refused response_url", u, n)
		}
	}
}

// TestBusy: beyond MaxJobs commands in flight, a command is refused with
// the limit named, and help still answers.
func TestBusy(t *testing.T) {
	rc := newReceiver(t, 0)
	svc := &fakeService{block: make(chan struct{})}
	r := newRig(t, svc, func(c *slackcmd.Config) {
		c.MaxJobs = 1
		c.InlineDeadline = 10 * time.Millisecond
		c.ResponseURLPrefix = rc.srv.URL
	})
	first := r.do(r.signed(form("nodes", rc.srv.URL+"/a")))
	if !strings.Contains(first.Body.String(), "Working on `nodes`") {
		t.Fatalf("first: %s", first.Body)
	}
	if w := r.do(r.signed(form("unhealthy", rc.srv.URL+"/b"))); !strings.Contains(w.Body.String(), "1 commands are already running (its limit)") {
		t.Errorf("second: %s", w.Body)
	}
	if w := r.do(r.signed(form("help", rc.srv.URL+"/c"))); !strings.Contains(w.Body.String(), "Usage") {
		t.Errorf("help: %s", w.Body)
	}
	close(svc.block)
	testkit.Eventually(t, 10*time.Second, "the first answer", func() bool { _, p := rc.got(); return len(p) == 1 })
	if w := r.do(r.signed(form("unhealthy", rc.srv.URL+"/d"))); w.Code != 200 || strings.Contains(w.Body.String(), "busy") {
		t.Errorf("after the first ended: %s", w.Body)
	}
}

// TestConfig: a wrong Config is refused naming the field.
func TestConfig(t *testing.T) {
	base := slackcmd.Config{Service: &fakeService{}, Secret: func() (string, error) { return secret, nil }}
	for _, tc := range []struct {
		edit func(*slackcmd.Config)
		want string
	}{
		{func(c *slackcmd.Config) { c.Service = nil }, "Service"},
		{func(c *slackcmd.Config) { c.Secret = nil }, "Secret"},
		{func(c *slackcmd.Config) { c.Tolerance = 10 * time.Minute }, "Tolerance"},
		{func(c *slackcmd.Config) { c.InlineDeadline = 3 * time.Second }, "InlineDeadline"},
		{func(c *slackcmd.Config) { c.ResponseURLPrefix = "hooks.slack.com" }, "ResponseURLPrefix"},
		{func(c *slackcmd.Config) { c.ResponseURLPrefix = "https://user:pw@hooks.slack.com/" }, "ResponseURLPrefix"},
		{func(c *slackcmd.Config) { c.MaxJobs = -1 }, "MaxJobs"},
	} {
		c := base
		tc.edit(&c)
		_, err := slackcmd.New(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}
