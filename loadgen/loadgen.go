package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Bounds on a run, whatever the Config asks.
const (
	MaxRate          = 1000 // arrivals per second
	MaxInFlightLimit = 4096
	MaxRequestsLimit = 1_000_000
	MaxDuration      = time.Hour
)

// Config is one run.
type Config struct {
	// URL is the endpoint: .../v1/completions, or .../chat/completions for
	// the chat API. A URL with no path gets /v1/completions.
	URL string
	// Rate is the mean arrival rate, requests per second (Poisson).
	Rate float64
	// Duration is how long arrivals go on.
	Duration time.Duration
	// Prompt and Output are the length distributions in tokens.
	Prompt, Output Dist
	// Stream asks for Server-Sent Events; TTFT is measured only then.
	Stream bool
	// MaxInFlight caps the requests outstanding (0: 64); MaxRequests the
	// requests sent in all (0: no cap but the bounds).
	MaxInFlight, MaxRequests int
	// Timeout bounds each request (0: 60 s); the run ends at most Timeout
	// after Duration.
	Timeout time.Duration
	// Model is the request's model field (empty: "sim").
	Model string
	// Seed fixes the arrival times and lengths drawn.
	Seed uint64
	// Client sends the requests (nil: a client of its own).
	Client *http.Client
}

// Percentiles summarizes a set of durations, in seconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Result is what a run measured.
type Result struct {
	URL     string  `json:"url"`
	Elapsed float64 `json:"elapsed_seconds"`
	// Sent requests, of which Succeeded; Failures counts the others by
	// kind: "http NNN", "timeout", "connection", "stream cut", "bad body".
	Sent      int            `json:"sent"`
	Succeeded int            `json:"succeeded"`
	Failures  map[string]int `json:"failures"`
	// Skipped counts arrivals not sent because MaxInFlight requests were
	// outstanding.
	Skipped int `json:"skipped"`
	// TTFT (streaming only) and E2E over the successful requests.
	TTFT *Percentiles `json:"ttft_seconds,omitempty"`
	E2E  Percentiles  `json:"e2e_seconds"`
	// TTFTAll (streaming only) is the time to the first token over every
	// request sent: one that failed before its first token counts for the
	// time it waited until it failed (Timeout for a timeout), so that
	// requests a server never answers weigh in the tail instead of
	// dropping out of it.
	TTFTAll *Percentiles `json:"ttft_all_seconds,omitempty"`
	// E2EAll is E2E over every request sent, one that failed counting
	// for the time it waited until it failed.
	E2EAll Percentiles `json:"e2e_all_seconds"`
}

// Failed is the number of failed requests.
func (r *Result) Failed() int {
	n := 0
	for _, v := range r.Failures {
		n += v
	}
	return n
}

// check validates cfg and fills in its defaults.
func (cfg *Config) check() error {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q: want http(s)://host[:port]/v1/completions or .../v1/chat/completions", cfg.URL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/completions"
		cfg.URL = u.String()
	}
	switch {
	case !(cfg.Rate > 0) || cfg.Rate > MaxRate:
		return fmt.Errorf("rate %v: want more than 0 and at most %d a second", cfg.Rate, MaxRate)
	case cfg.Duration <= 0 || cfg.Duration > MaxDuration:
		return fmt.Errorf("duration %v: want more than 0 and at most %v", cfg.Duration, MaxDuration)
	case cfg.MaxInFlight < 0 || cfg.MaxInFlight > MaxInFlightLimit:
		return fmt.Errorf("max in flight %d: want 1 to %d", cfg.MaxInFlight, MaxInFlightLimit)
	case cfg.MaxRequests < 0 || cfg.MaxRequests > MaxRequestsLimit:
		return fmt.Errorf("max requests %d: want 1 to %d", cfg.MaxRequests, MaxRequestsLimit)
	case cfg.Timeout < 0:
		return errors.New("timeout must not be negative")
	case len(cfg.Prompt) == 0 || len(cfg.Output) == 0:
		return errors.New("prompt and output length distributions are required")
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.MaxRequests == 0 {
		cfg.MaxRequests = MaxRequestsLimit
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.Model == "" {
		cfg.Model = "sim"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: cfg.MaxInFlight,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		}}
	}
	return nil
}

// outcome is one request's result.
type outcome struct {
	fail      string // "" on success
	ttft, e2e time.Duration
	sawFirst  bool
	took      time.Duration // until it ended, failed or not
}

// Run sends the load and returns what it measured. It returns an error only
// for a Config it refuses; failed requests are counted in the Result. It
// stops sending when ctx is done and returns once every request has ended.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	chat := strings.HasSuffix(strings.TrimSuffix(cfg.URL, "/"), "/chat/completions")
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c6f616467656e))
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration+cfg.Timeout)
	defer cancel()

	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, cfg.MaxInFlight)
	res := &Result{URL: cfg.URL, Failures: map[string]int{}}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	next := time.Duration(0)
arrivals:
	for res.Sent < cfg.MaxRequests {
		next += time.Duration(rng.ExpFloat64() / cfg.Rate * float64(time.Second))
		if next >= cfg.Duration {
			break
		}
		timer.Reset(time.Until(start.Add(next)))
		select {
		case <-ctx.Done():
			break arrivals
		case <-timer.C:
		}
		prompt, output := cfg.Prompt.Sample(rng), cfg.Output.Sample(rng)
		select {
		case slots <- struct{}{}:
		default:
			res.Skipped++
			continue
		}
		res.Sent++
		body := requestBody(cfg, chat, prompt, output)
		wg.Go(func() {
			defer func() { <-slots }()
			t0 := time.Now()
			o := send(ctx, cfg, body)
			o.took = time.Since(t0)
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start).Seconds()
	var ttft, e2e, ttftAll, e2eAll []time.Duration
	for _, o := range outcomes {
		if o.fail != "" {
			e2eAll = append(e2eAll, o.took)
		} else {
			e2eAll = append(e2eAll, o.e2e)
		}
		switch {
		case o.sawFirst:
			ttftAll = append(ttftAll, o.ttft)
		case o.fail != "":
			ttftAll = append(ttftAll, o.took)
		}
		if o.fail != "" {
			res.Failures[o.fail]++
			continue
		}
		res.Succeeded++
		e2e = append(e2e, o.e2e)
		if o.sawFirst {
			ttft = append(ttft, o.ttft)
		}
	}
	res.E2E, res.E2EAll = percentiles(e2e), percentiles(e2eAll)
	if cfg.Stream {
		p, all := percentiles(ttft), percentiles(ttftAll)
		res.TTFT, res.TTFTAll = &p, &all
	}
	return res, nil
}

// requestBody is the JSON of one request.
func requestBody(cfg Config, chat bool, prompt, output int) []byte {
	text := strings.Repeat("tok ", prompt)
	m := map[string]any{"model": cfg.Model, "max_tokens": output, "ignore_eos": true}
	if chat {
		m["messages"] = []map[string]string{{"role": "user", "content": text}}
	} else {
		m["prompt"] = text
	}
	if cfg.Stream {
		m["stream"] = true
	}
	b, _ := json.Marshal(m)
	return b
}

// send makes one request and times it.
func send(ctx context.Context, cfg Config, body []byte) outcome {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return outcome{fail: "connection"}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return outcome{fail: kind(ctx, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return outcome{fail: fmt.Sprintf("http %d", resp.StatusCode)}
	}
	if !cfg.Stream {
		var v struct {
			Choices []json.RawMessage `json:"choices"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v); err != nil {
			if ctx.Err() != nil {
				return outcome{fail: kind(ctx, err)}
			}
			return outcome{fail: "bad body"}
		}
		if len(v.Choices) == 0 {
			return outcome{fail: "bad body"}
		}
		return outcome{e2e: time.Since(t0)}
	}
	o := outcome{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			o.e2e = time.Since(t0)
			return o
		}
		if !o.sawFirst && hasContent(data) {
			o.ttft, o.sawFirst = time.Since(t0), true
		}
	}
	o.fail = "stream cut"
	if ctx.Err() != nil {
		o.fail = kind(ctx, ctx.Err())
	}
	return o
}

// hasContent reports whether a streamed chunk carries generated text.
func hasContent(data string) bool {
	var c struct {
		Choices []struct {
			Text  string `json:"text"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &c) != nil {
		return false
	}
	for _, ch := range c.Choices {
		if ch.Text != "" || ch.Delta.Content != "" {
			return true
		}
	}
	return false
}

// kind classifies a transport error.
func kind(ctx context.Context, err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "connection"
}

// percentiles takes nearest-rank percentiles.
func percentiles(ds []time.Duration) Percentiles {
	p := Percentiles{N: len(ds)}
	if len(ds) == 0 {
		return p
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return ds[max(i, 0)].Seconds()
	}
	p.P50, p.P90, p.P99, p.Max = at(0.5), at(0.9), at(0.99), ds[len(ds)-1].Seconds()
	return p
}

// WriteTable prints the result for a terminal.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\n", r.URL)
	fmt.Fprintf(tw, "requests\tsent %d, succeeded %d, failed %d, skipped at the in-flight cap %d, in %.1f s\n",
		r.Sent, r.Succeeded, r.Failed(), r.Skipped, r.Elapsed)
	fmt.Fprintln(tw, "\tn\tp50\tp90\tp99\tmax")
	row := func(name string, p Percentiles) {
		if p.N == 0 {
			fmt.Fprintf(tw, "%s\t0\t-\t-\t-\t-\n", name)
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", name, p.N, secs(p.P50), secs(p.P90), secs(p.P99), secs(p.Max))
	}
	if r.TTFT != nil {
		row("TTFT", *r.TTFT)
	}
	if r.TTFTAll != nil {
		row("TTFT, all sent", *r.TTFTAll)
	}
	row("E2E", r.E2E)
	row("E2E, all sent", r.E2EAll)
	kinds := slices.Sorted(maps.Keys(r.Failures))
	for _, k := range kinds {
		fmt.Fprintf(tw, "failed: %s\t%d\n", k, r.Failures[k])
	}
	return tw.Flush()
}

func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.2fs", s)
}
