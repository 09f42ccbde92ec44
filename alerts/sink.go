package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Sink is where notifications go: a webhook taking one JSON body per alert.
type Sink struct {
	// Name labels the sink's metrics and log lines ("slack", "json",
	// "text").
	Name string
	// URL is the webhook's address. It is a secret: never logged.
	URL string
	// Language is the language of the verdict the sink is given.
	Language llmdiagv1.Language
	// Render builds the request body (JSON).
	Render func(*Notification) ([]byte, error)
}

// Check reports whether the sink is usable; the error never quotes the
// URL.
func (s Sink) Check() error {
	if s.Name == "" || s.Render == nil {
		return errors.New("alerts: a sink needs a name and a renderer")
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Neither the URL nor url.Parse's error (which quotes it).
		return fmt.Errorf("alerts: sink %s: the webhook URL is not an http(s) URL", s.Name)
	}
	return nil
}

// SlackSink posts Block Kit messages to a Slack incoming webhook.
func SlackSink(webhookURL string) Sink {
	return Sink{Name: "slack", URL: webhookURL, Language: llmdiagv1.Language_LANGUAGE_EN, Render: RenderSlack}
}

// JSONSink posts the alert and the structured diagnosis (RenderJSON).
func JSONSink(webhookURL string) Sink {
	return Sink{Name: "json", URL: webhookURL, Language: llmdiagv1.Language_LANGUAGE_EN, Render: RenderJSON}
}

// TextSink posts a plain-text message in Chinese in the body format of
// the chat tool: feishu, dingtalk or wecom (RenderText).
func TextSink(webhookURL, format string) (Sink, error) {
	if _, ok := textFormats[format]; !ok {
		return Sink{}, fmt.Errorf("alerts: text format %q: want feishu, dingtalk or wecom", format)
	}
	return Sink{Name: "text", URL: webhookURL, Language: llmdiagv1.Language_LANGUAGE_ZH,
		Render: func(n *Notification) ([]byte, error) { return RenderText(n, format) }}, nil
}

// metrics are the receiver's, registered once per registry.
type metrics struct {
	messages   *prometheus.CounterVec // by outcome
	alerts     *prometheus.CounterVec // by outcome
	unmatched  prometheus.Counter
	delivered  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	dropped    *prometheus.CounterVec // by sink and limit
	retries    *prometheus.CounterVec
	queueLen   *prometheus.GaugeVec
	deliverySe *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_alertmanager_messages_total",
			Help: "Alertmanager webhook messages received at /alertmanager, by outcome: accepted, invalid (400), too_large (413), queue_full (503)."}, []string{"outcome"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_alerts_received_total",
			Help: "Alerts in accepted messages, by outcome: accepted, or duplicate (same fingerprint, status and start within the de-duplication window)."}, []string{"outcome"}),
		unmatched: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmdiag_alerts_unmatched_total",
			Help: "Alerts that named no node llmdiag knows (forwarded without a verdict)."}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_alert_sink_delivered_total",
			Help: "Notifications a sink accepted (2xx)."}, []string{"sink"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_alert_sink_failed_total",
			Help: "Notifications given up on: a final 4xx, or retries exhausted (attempts or total time)."}, []string{"sink"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_alert_sink_dropped_total",
			Help: "Notifications dropped before delivery, by the limit that dropped them: queue (the oldest, when the sink's queue was full), render, shutdown."}, []string{"sink", "limit"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_alert_sink_retries_total",
			Help: "Delivery attempts after the first."}, []string{"sink"}),
		queueLen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmdiag_alert_sink_queue_length",
			Help: "Notifications waiting in a sink's queue."}, []string{"sink"}),
		deliverySe: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmdiag_alert_sink_delivery_seconds",
			Help:    "Time from a notification's queueing to the sink's 2xx, retries included.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"sink"}),
	}
	for _, c := range []prometheus.Collector{m.messages, m.alerts, m.unmatched, m.delivered, m.failed, m.dropped, m.retries, m.queueLen, m.deliverySe} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("alerts: register metrics: %w", err)
		}
	}
	return m, nil
}

// sender delivers one sink's notifications in order, one at a time.
type sender struct {
	sink   Sink
	client *http.Client
	log    *slog.Logger
	m      *metrics
	opts   Options

	mu   sync.Mutex
	q    []queued
	wake chan struct{}
}

type queued struct {
	body []byte
	at   time.Time
}

func newSender(s Sink, client *http.Client, log *slog.Logger, m *metrics, opts Options) *sender {
	m.queueLen.WithLabelValues(s.Name).Set(0)
	for _, c := range []*prometheus.CounterVec{m.delivered, m.failed, m.retries} {
		c.WithLabelValues(s.Name)
	}
	m.dropped.WithLabelValues(s.Name, "queue")
	return &sender{sink: s, client: client, log: log.With("sink", s.Name), m: m, opts: opts, wake: make(chan struct{}, 1)}
}

// push renders n and queues it; when the queue is full the oldest
// notification is dropped.
func (s *sender) push(n *Notification) {
	body, err := s.sink.Render(n)
	if err != nil {
		s.m.dropped.WithLabelValues(s.sink.Name, "render").Inc()
		s.log.Error("alerts: cannot render the notification; dropped", "alert", n.Alert.Labels["alertname"], "err", err)
		return
	}
	s.mu.Lock()
	if len(s.q) >= s.opts.SinkQueue {
		s.q = s.q[1:]
		s.m.dropped.WithLabelValues(s.sink.Name, "queue").Inc()
		s.log.Warn("alerts: sink queue full; dropped its oldest notification", "limit", "sink queue", "capacity", s.opts.SinkQueue)
	}
	s.q = append(s.q, queued{body: body, at: s.opts.Clock.Now()})
	s.m.queueLen.WithLabelValues(s.sink.Name).Set(float64(len(s.q)))
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) pop() (queued, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return queued{}, false
	}
	q := s.q[0]
	s.q = s.q[1:]
	s.m.queueLen.WithLabelValues(s.sink.Name).Set(float64(len(s.q)))
	return q, true
}

// run delivers until ctx is done, then drops what is left.
func (s *sender) run(ctx context.Context) {
	for {
		for {
			q, ok := s.pop()
			if !ok {
				break
			}
			s.deliver(ctx, q)
			if ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			if n := len(s.q); n > 0 {
				s.m.dropped.WithLabelValues(s.sink.Name, "shutdown").Add(float64(n))
				s.log.Warn("alerts: shutting down; dropped queued notifications", "count", n)
				s.q = nil
				s.m.queueLen.WithLabelValues(s.sink.Name).Set(0)
			}
			s.mu.Unlock()
			return
		case <-s.wake:
		}
	}
}

// deliver posts q, retrying as Options say.
func (s *sender) deliver(ctx context.Context, q queued) {
	start := s.opts.Clock.Now()
	for attempt := 1; ; attempt++ {
		retry, err := s.post(ctx, q.body)
		if err == nil {
			s.m.delivered.WithLabelValues(s.sink.Name).Inc()
			s.m.deliverySe.WithLabelValues(s.sink.Name).Observe(s.opts.Clock.Now().Sub(q.at).Seconds())
			return
		}
		if ctx.Err() != nil {
			s.m.dropped.WithLabelValues(s.sink.Name, "shutdown").Inc()
			return
		}
		wait := s.backoff(attempt)
		elapsed := s.opts.Clock.Now().Sub(start)
		var limit string
		switch {
		case !retry:
			limit = "final answer"
		case attempt >= s.opts.MaxAttempts:
			limit = fmt.Sprintf("max attempts (%d)", s.opts.MaxAttempts)
		case elapsed+wait > s.opts.MaxElapsed:
			limit = fmt.Sprintf("max elapsed (%v)", s.opts.MaxElapsed)
		}
		if limit != "" {
			s.m.failed.WithLabelValues(s.sink.Name).Inc()
			s.log.Warn("alerts: delivery failed; notification given up", "attempts", attempt, "limit", limit, "err", err)
			return
		}
		s.m.retries.WithLabelValues(s.sink.Name).Inc()
		s.log.Debug("alerts: delivery failed; retrying", "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			s.m.dropped.WithLabelValues(s.sink.Name, "shutdown").Inc()
			return
		case <-s.opts.Clock.After(wait):
		}
	}
}

// backoff is the wait after the attempt-th failure: BackoffBase·2^(n-1),
// at most BackoffMax, between half and all of it.
func (s *sender) backoff(attempt int) time.Duration {
	d := s.opts.BackoffBase
	for i := 1; i < attempt && d < s.opts.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.opts.BackoffMax)
	return d/2 + time.Duration(s.opts.Jitter()*float64(d/2))
}

// maxErrorBody bounds what of a failed answer is kept for the log.
const maxErrorBody = 256

// post makes one attempt. retry says whether another may succeed. The
// error never holds the webhook URL.
func (s *sender) post(ctx context.Context, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.sink.URL, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("cannot build the request") // its error quotes the URL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "llmdiag-alerts")
	resp, err := s.client.Do(req)
	if err != nil {
		return true, s.scrub(err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	err = s.scrub(fmt.Errorf("answer %s: %s", resp.Status, strings.TrimSpace(string(head))))
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, err
}

// scrub removes the webhook URL from err: net/http's errors quote it.
func (s *sender) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	msg := err.Error()
	if s.sink.URL != "" && strings.Contains(msg, s.sink.URL) {
		msg = strings.ReplaceAll(msg, s.sink.URL, "(webhook URL)")
	}
	if u, perr := url.Parse(s.sink.URL); perr == nil && len(u.Path) > 1 && strings.Contains(msg, u.Path) {
		msg = strings.ReplaceAll(msg, u.Path, "/(redacted)")
	}
	return errors.New(msg)
}
