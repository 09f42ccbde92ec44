package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	// DefaultMaxConcurrent is how many completion requests a node holds at
	// once when Config.MaxConcurrent is 0.
	DefaultMaxConcurrent = 256
	// DefaultMaxBodyBytes bounds a completion request's body when
	// Config.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 1 << 20
	// defaultOutputTokens is the output of a request without max_tokens or
	// sim_output_tokens: the legacy completions API's default max_tokens.
	defaultOutputTokens = 16
	// tokenText is the text of every generated token.
	tokenText = " tok"
)

// waiter is what an HTTP handler waits on while its request runs in the
// simulation: the engine updates it under the node's lock, never blocking,
// and wakes the handler.
type waiter struct {
	mu        sync.Mutex
	generated int
	done      bool
	aborted   bool
	wake      chan struct{} // capacity 1: a pending wake-up
}

func newWaiter() *waiter { return &waiter{wake: make(chan struct{}, 1)} }

// progress records that the request has generated tokens (done: all).
// A nil waiter (a built-in arrival) ignores it.
func (w *waiter) progress(generated int, done bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.generated, w.done = generated, done
	w.mu.Unlock()
	w.signal()
}

// abort records that the request was abandoned in the queue.
func (w *waiter) abort() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.aborted = true
	w.mu.Unlock()
	w.signal()
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *waiter) state() (generated int, done, aborted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.generated, w.done, w.aborted
}

// externalRequest is a request received over HTTP at t: prompt tokens,
// output tokens, and whether the output stops at the client's max_tokens
// (finish reason "length") rather than by itself ("stop"). It has no shared
// prefix and no prefix-cache hits.
func (n *node) externalRequest(t float64, prompt, output int, length bool) *request {
	r := &request{arrival: t, adapter: -1, prompt: prompt, output: output, maxTokens: output}
	if length {
		r.reason = reasonLength
	}
	n.remoteKV(r, t)
	return r
}

// inject puts a received request into n's simulation at the current
// simulated instant, as an arrival, and returns what to wait on.
func (f *Fleet) inject(n *node, prompt, output int, length bool) *waiter {
	f.mu.Lock() // no Step in flight; taken before the node's, as Step does
	defer f.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	t := f.now.Seconds()
	r := n.externalRequest(t, prompt, output, length)
	r.ext = newWaiter()
	n.place(n.route(), r, t)
	if f.injected != nil {
		f.injected <- struct{}{}
	}
	return r.ext
}

// completionRequest is the part of an OpenAI completions or chat
// completions request the simulator reads; other fields are accepted and
// ignored.
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// SimPromptTokens and SimOutputTokens are the simulator's extension
	// fields (see Handler).
	SimPromptTokens *int `json:"sim_prompt_tokens"`
	SimOutputTokens *int `json:"sim_output_tokens"`
}

// apiError is an error answered in OpenAI's shape.
type apiError struct {
	status  int
	typ     string
	param   string
	code    string
	message string
}

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, message: fmt.Sprintf(format, args...)}
}

func (e *apiError) write(w http.ResponseWriter) {
	body := map[string]any{"message": e.message, "type": e.typ, "param": nil, "code": nil}
	if e.param != "" {
		body["param"] = e.param
	}
	if e.code != "" {
		body["code"] = e.code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"error": body})
}

// promptChars counts the characters of a completions prompt: a string, an
// array of one string, or an array of token ids (counted as 4 characters
// each, so they count as one token each).
func promptChars(raw json.RawMessage) (int, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, badRequest("prompt", "'prompt' is a required property")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return utf8.RuneCountInString(s), nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		if len(ss) != 1 {
			return 0, badRequest("prompt", "the simulator serves one prompt per request, got %d", len(ss))
		}
		return utf8.RuneCountInString(ss[0]), nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return 4 * len(ids), nil
	}
	return 0, badRequest("prompt", "'prompt' must be a string, an array of one string or an array of token ids")
}

// messageChars counts the characters of a chat request's messages: their
// string contents, or the text parts of array contents.
func messageChars(raw json.RawMessage) (int, *apiError) {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return 0, badRequest("messages", "'messages' is a required property")
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return 0, badRequest("messages", "'messages' must be an array of messages")
	}
	if len(msgs) == 0 {
		return 0, badRequest("messages", "'messages' must not be empty")
	}
	chars := 0
	for i, m := range msgs {
		if m.Role == "" {
			return 0, badRequest(fmt.Sprintf("messages[%d].role", i), "'role' is a required property")
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			chars += utf8.RuneCountInString(s)
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			for _, p := range parts {
				chars += utf8.RuneCountInString(p.Text)
			}
		}
	}
	return chars, nil
}

// lengths decides a request's prompt and output tokens, and whether the
// output stops at max_tokens.
func (n *node) lengths(req *completionRequest, chat bool) (prompt, output int, length bool, e *apiError) {
	if req.N != nil && *req.N != 1 {
		return 0, 0, false, badRequest("n", "the simulator serves n=1 only, got %d", *req.N)
	}
	if req.SimPromptTokens != nil {
		if *req.SimPromptTokens < 1 {
			return 0, 0, false, badRequest("sim_prompt_tokens", "sim_prompt_tokens must be at least 1, got %d", *req.SimPromptTokens)
		}
		prompt = *req.SimPromptTokens
	} else {
		var chars int
		if chat {
			chars, e = messageChars(req.Messages)
		} else {
			chars, e = promptChars(req.Prompt)
		}
		if e != nil {
			return 0, 0, false, e
		}
		prompt = max((chars+3)/4, 1)
	}
	maxTokens, param := req.MaxTokens, "max_tokens"
	if chat && req.MaxCompletionTokens != nil {
		maxTokens, param = req.MaxCompletionTokens, "max_completion_tokens"
	}
	if maxTokens != nil && *maxTokens < 1 {
		return 0, 0, false, badRequest(param, "%s must be at least 1, got %d", param, *maxTokens)
	}
	if req.SimOutputTokens != nil && *req.SimOutputTokens < 1 {
		return 0, 0, false, badRequest("sim_output_tokens", "sim_output_tokens must be at least 1, got %d", *req.SimOutputTokens)
	}
	if prompt >= n.maxLen {
		return 0, 0, false, badRequest("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens.", n.maxLen, prompt)
	}
	limit := n.maxLen - prompt
	if maxTokens != nil {
		if *maxTokens > limit {
			return 0, 0, false, badRequest(param, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", n.maxLen, prompt+*maxTokens, prompt, *maxTokens)
		}
		limit = *maxTokens
	}
	switch {
	case req.SimOutputTokens != nil && *req.SimOutputTokens < limit:
		return prompt, *req.SimOutputTokens, false, nil
	case req.SimOutputTokens != nil || maxTokens != nil:
		return prompt, limit, true, nil
	default:
		out := min(defaultOutputTokens, limit)
		return prompt, out, true, nil
	}
}

// Handler returns the HTTP handler of node id's OpenAI-compatible API:
// POST /v1/completions and POST /v1/chat/completions, non-streaming or
// streaming. The node's server serves it beside /metrics; it is exported
// so that a test can drive it with Step instead of the wall clock.
func (f *Fleet) Handler(id string) (http.Handler, error) {
	n, err := f.node(id)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { f.complete(n, w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { f.complete(n, w, r, true) })
	return mux, nil
}

func (f *Fleet) maxConcurrent() int64 {
	if f.cfg.MaxConcurrent > 0 {
		return int64(f.cfg.MaxConcurrent)
	}
	return DefaultMaxConcurrent
}

func (f *Fleet) maxBody() int64 {
	if f.cfg.MaxBodyBytes > 0 {
		return f.cfg.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// complete serves one completion request: it joins the node's simulation
// and is answered when the simulation has generated its tokens.
func (f *Fleet) complete(n *node, w http.ResponseWriter, r *http.Request, chat bool) {
	limit := f.maxConcurrent()
	if n.inflight.Add(1) > limit {
		n.inflight.Add(-1)
		w.Header().Set("Retry-After", "1")
		(&apiError{status: http.StatusTooManyRequests, typ: "rate_limit_exceeded", code: "rate_limit_exceeded",
			message: fmt.Sprintf("node %s holds at most %d concurrent requests (sim MaxConcurrent); retry later", n.cfg.ID, limit)}).write(w)
		return
	}
	defer n.inflight.Add(-1)

	var req completionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, f.maxBody()))
	if err := dec.Decode(&req); err != nil {
		if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
			(&apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				message: fmt.Sprintf("request body larger than %d bytes", mb.Limit)}).write(w)
			return
		}
		badRequest("", "We could not parse the JSON body of your request: %v", err).write(w)
		return
	}
	prompt, output, length, e := n.lengths(&req, chat)
	if e != nil {
		e.write(w)
		return
	}
	model := req.Model
	if model == "" {
		model = n.cfg.Model
	}
	wt := f.inject(n, prompt, output, length)
	a := answer{chat: chat, model: model, created: time.Now().Unix(), prompt: prompt, output: output, length: length,
		id: fmt.Sprintf("%s-%s-%d", map[bool]string{false: "cmpl", true: "chatcmpl"}[chat], n.cfg.ID, idSeq.Add(1))}
	if req.Stream {
		a.usage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		a.stream(w, r, n, wt)
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return // the client went away; the simulated request runs on
		case <-wt.wake:
		}
		if _, done, aborted := wt.state(); aborted {
			aborted503(n).write(w)
			return
		} else if done {
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a.whole())
}

func aborted503(n *node) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: "server_error",
		message: fmt.Sprintf("request abandoned after waiting %s in node %s's queue", n.cfg.queueTimeout(), n.cfg.ID)}
}

// idSeq numbers the responses' ids.
var idSeq atomic.Uint64

// answer builds the response bodies of one request.
type answer struct {
	chat           bool
	id, model      string
	created        int64
	prompt, output int
	length, usage  bool
}

func (a answer) finish() string {
	if a.length {
		return "length"
	}
	return "stop"
}

func (a answer) usageBody() map[string]int {
	return map[string]int{"prompt_tokens": a.prompt, "completion_tokens": a.output, "total_tokens": a.prompt + a.output}
}

func (a answer) whole() map[string]any {
	text := strings.Repeat(tokenText, a.output)
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": a.finish()}
	object := "text_completion"
	if a.chat {
		object = "chat.completion"
		choice["message"] = map[string]any{"role": "assistant", "content": text}
	} else {
		choice["text"] = text
	}
	return map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.model,
		"choices": []any{choice}, "usage": a.usageBody()}
}

// chunk is one streamed event: a token's text, or the end (finish set).
func (a answer) chunk(text string, first bool, finish string) map[string]any {
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": nil}
	if finish != "" {
		choice["finish_reason"] = finish
	}
	object := "text_completion"
	if a.chat {
		object = "chat.completion.chunk"
		delta := map[string]any{}
		if first {
			delta["role"] = "assistant"
		}
		if text != "" || first {
			delta["content"] = text
		}
		choice["delta"] = delta
	} else {
		choice["text"] = text
	}
	return map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.model, "choices": []any{choice}}
}

// stream answers with Server-Sent Events: one chunk per token as the
// simulation generates them, a last chunk with the finish reason, the
// usage if asked, then [DONE].
func (a answer) stream(w http.ResponseWriter, r *http.Request, n *node, wt *waiter) {
	fl, _ := w.(http.Flusher)
	sent, started := 0, false
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-wt.wake:
		}
		generated, done, aborted := wt.state()
		if aborted && !started {
			aborted503(n).write(w)
			return
		}
		if !started && generated > 0 {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		for ; sent < generated; sent++ {
			send(a.chunk(tokenText, sent == 0, ""))
		}
		if done {
			send(a.chunk("", false, a.finish()))
			if a.usage {
				send(map[string]any{"id": a.id, "object": a.chunk("", false, "")["object"], "created": a.created,
					"model": a.model, "choices": []any{}, "usage": a.usageBody()})
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
		if fl != nil {
			fl.Flush()
		}
		if done {
			return
		}
	}
}
