package sim_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/sim"
)

// trafficFleet is the seed scenario's kimi node with only received
// requests, at simulated time 0, its API on an httptest server.
type trafficFleet struct {
	f        *sim.Fleet
	id       string
	url      string
	injected chan struct{}
}

func newTrafficFleet(t *testing.T, edit func(*sim.Config)) *trafficFleet {
	t.Helper()
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cfg.Nodes {
		if n.ID == "kimi-k2.6-0" {
			cfg.Nodes = []sim.Node{n}
		}
	}
	cfg = sim.ExternalOnly(cfg)
	cfg.Warmup = 0
	if edit != nil {
		edit(&cfg)
	}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tf := &trafficFleet{f: f, id: cfg.Nodes[0].ID, injected: make(chan struct{}, 64)}
	sim.NotifyInjected(f, tf.injected)
	h, err := f.Handler(tf.id)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tf.url = srv.URL
	return tf
}

type reply struct {
	status int
	body   string
	err    error
}

// post sends a request in the background.
func (tf *trafficFleet) post(path, body string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		resp, err := http.Post(tf.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			ch <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- reply{status: resp.StatusCode, body: string(b), err: err}
	}()
	return ch
}

// waitInjected waits until k requests have joined the simulation.
func (tf *trafficFleet) waitInjected(t *testing.T, k int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for range k {
		select {
		case <-tf.injected:
		case <-deadline:
			t.Fatal("requests did not reach the simulation within 10 s")
		}
	}
}

// runUntilFinished steps simulated time until the node has finished
// finished requests in all, within a simulated minute.
func (tf *trafficFleet) runUntilFinished(t *testing.T, finished uint64) {
	t.Helper()
	for range 6000 {
		st, err := tf.f.Stats(tf.id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finished >= finished {
			return
		}
		tf.f.Step(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d requests finished within a simulated minute", finished)
}

func await(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
	}
	return reply{}
}

// events splits a Server-Sent Events body into its data payloads.
func events(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not an SSE data line", line)
		}
		out = append(out, data)
	}
	return out
}

func TestCompletionsJoinThePhysics(t *testing.T) {
	tf := newTrafficFleet(t, nil)
	before := histOf(scrape(t, tf.f, tf.id), "vllm:time_to_first_token_seconds").count
	prompt := strings.Repeat("abcd", 100) // 100 tokens
	plain := tf.post("/v1/completions", `{"model":"m","prompt":"`+prompt+`","max_tokens":8}`)
	stream := tf.post("/v1/completions", `{"model":"m","prompt":"`+prompt+`","max_tokens":8,"stream":true}`)
	chat := tf.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"sim_prompt_tokens":300,"sim_output_tokens":5,"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}}`)
	tf.waitInjected(t, 3)
	st, _ := tf.f.Stats(tf.id)
	if st.Waiting+st.Running != 3 {
		t.Fatalf("waiting %d + running %d after three requests, want 3", st.Waiting, st.Running)
	}
	var gauges float64
	mfs := scrape(t, tf.f, tf.id)
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting"} {
		for _, m := range mfs[name].GetMetric() {
			gauges += m.GetGauge().GetValue()
		}
	}
	if gauges != 3 {
		t.Errorf("/metrics: running + waiting = %v after three requests, want 3", gauges)
	}
	tf.runUntilFinished(t, 3)

	r := await(t, plain)
	var whole struct {
		Object  string `json:"object"`
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct{ PromptTokens, CompletionTokens int } `json:"usage"`
	}
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &whole); err != nil {
		t.Fatal(err)
	}
	if whole.Object != "text_completion" || len(whole.Choices) != 1 || whole.Choices[0].FinishReason != "length" ||
		whole.Choices[0].Text != strings.Repeat(" tok", 8) {
		t.Errorf("non-streaming answer %s", r.body)
	}
	var usage map[string]map[string]int
	json.Unmarshal([]byte(r.body), &usage)
	if u := usage["usage"]; u["prompt_tokens"] != 100 || u["completion_tokens"] != 8 || u["total_tokens"] != 108 {
		t.Errorf("usage %v, want 100 + 8", u)
	}

	r = await(t, stream)
	ev := events(t, r.body)
	if len(ev) != 10 || ev[9] != "[DONE]" {
		t.Fatalf("stream of 8 tokens: %d events (%q), want 8 tokens, the finish and [DONE]", len(ev), ev)
	}
	for i, e := range ev[:9] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil || c.Object != "text_completion" || len(c.Choices) != 1 {
			t.Fatalf("chunk %d %q: %v", i, e, err)
		}
		if last := i == 8; last != (c.Choices[0].FinishReason != nil) || (!last && c.Choices[0].Text != " tok") {
			t.Errorf("chunk %d: %s", i, e)
		}
	}

	r = await(t, chat)
	ev = events(t, r.body)
	// 5 tokens (the first with the role), the finish (stop: under
	// max_tokens), the usage, [DONE].
	if len(ev) != 8 || ev[7] != "[DONE]" {
		t.Fatalf("chat stream: %q", ev)
	}
	if !strings.Contains(ev[0], `"role":"assistant"`) || !strings.Contains(ev[0], `"object":"chat.completion.chunk"`) ||
		!strings.Contains(ev[5], `"finish_reason":"stop"`) || !strings.Contains(ev[6], `"prompt_tokens":300`) {
		t.Errorf("chat stream: %q", ev)
	}

	after := histOf(scrape(t, tf.f, tf.id), "vllm:time_to_first_token_seconds").count
	if after-before != 3 {
		t.Errorf("TTFT histogram count grew by %v, want 3", after-before)
	}
	st, _ = tf.f.Stats(tf.id)
	if st.PromptTokens != 100+100+300 || st.GenerationTokens != 8+8+5 || st.Waiting+st.Running != 0 {
		t.Errorf("stats %+v, want 500 prompt and 21 generated tokens, nothing left", st)
	}
}

func TestCompletionErrors(t *testing.T) {
	tf := newTrafficFleet(t, func(c *sim.Config) { c.MaxBodyBytes = 4096 })
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"bad json", "/v1/completions", `{"prompt":`, 400, ""},
		{"no prompt", "/v1/completions", `{"model":"m"}`, 400, "prompt"},
		{"max_tokens 0", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "max_tokens"},
		{"n 2", "/v1/completions", `{"prompt":"x","n":2}`, 400, "n"},
		{"too long", "/v1/completions", `{"prompt":"x","sim_prompt_tokens":100,"max_tokens":100000000}`, 400, "max_tokens"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages"},
		{"bad sim field", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"sim_output_tokens":-1}`, 400, "sim_output_tokens"},
		{"body too large", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 5000) + `"}`, 413, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := await(t, tf.post(tc.path, tc.body))
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
				t.Fatalf("error body %s (%v)", r.body, err)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param %v, want %q", e.Error.Param, tc.param)
			}
		})
	}
	if st, _ := tf.f.Stats(tf.id); st.Waiting+st.Running != 0 {
		t.Errorf("a refused request reached the simulation: %+v", st)
	}
}

func TestConcurrencyCap(t *testing.T) {
	tf := newTrafficFleet(t, func(c *sim.Config) { c.MaxConcurrent = 2 })
	body := `{"prompt":"x","max_tokens":4}`
	a, b := tf.post("/v1/completions", body), tf.post("/v1/completions", body)
	tf.waitInjected(t, 2)
	r := await(t, tf.post("/v1/completions", body))
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "at most 2 concurrent") {
		t.Fatalf("third request: %d %s, want 429 naming the limit of 2", r.status, r.body)
	}
	tf.runUntilFinished(t, 2)
	for _, ch := range []<-chan reply{a, b} {
		if r := await(t, ch); r.status != 200 {
			t.Errorf("held request: %d %s", r.status, r.body)
		}
	}
	// The slots are free again.
	c := tf.post("/v1/completions", body)
	tf.waitInjected(t, 1)
	tf.runUntilFinished(t, 3)
	if r := await(t, c); r.status != 200 {
		t.Errorf("after the cap cleared: %d %s", r.status, r.body)
	}
}

func TestHungNodeHoldsRequests(t *testing.T) {
	tf := newTrafficFleet(t, func(c *sim.Config) {
		c.Nodes[0].Hang = []sim.Window{{Start: 0, End: 30 * time.Second}}
	})
	ch := tf.post("/v1/completions", `{"prompt":"x","max_tokens":4}`)
	tf.waitInjected(t, 1)
	tf.f.Step(29 * time.Second)
	if st, _ := tf.f.Stats(tf.id); st.Finished != 0 {
		t.Fatalf("a hung node finished a request: %+v", st)
	}
	select {
	case r := <-ch:
		t.Fatalf("answered during the hang: %+v", r)
	default:
	}
	tf.runUntilFinished(t, 1)
	if r := await(t, ch); r.status != 200 {
		t.Errorf("after the hang: %d %s", r.status, r.body)
	}
}
