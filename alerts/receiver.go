package alerts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/alertmanager/template"
	"github.com/prometheus/client_golang/prometheus"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Service is the part of the DiagnosisService the receiver calls: serve
// passes its in-process service, a remote tool a client
// (llmdiagv1connect.DiagnosisServiceClient has the same methods).
type Service interface {
	ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error)
	DiagnoseNode(context.Context, *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error)
}

// Clock is the time the receiver reads and waits on; tests inject a fake.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Defaults of Options' zero fields.
const (
	DefaultMaxBodyBytes    = 1 << 20
	DefaultMaxAlerts       = 1000
	DefaultIntakeQueue     = 64
	DefaultWorkers         = 2
	DefaultDedupWindow     = 5 * time.Minute
	DefaultDedupMax        = 10000
	DefaultIndexTTL        = 10 * time.Second
	DefaultMaxIndexNodes   = 10000
	DefaultDiagnoseTimeout = 10 * time.Second
	DefaultSinkQueue       = 256
	DefaultAttemptTimeout  = 10 * time.Second
	DefaultMaxAttempts     = 5
	DefaultMaxElapsed      = 2 * time.Minute
	DefaultBackoffBase     = 500 * time.Millisecond
	DefaultBackoffMax      = 30 * time.Second
)

// Options tune the receiver. Zero values take the defaults above.
type Options struct {
	// NodeLabels are the alert labels that may name a node, tried in order
	// (default instance, node).
	NodeLabels []string
	// Runbook, when set, returns the URL of the runbook of a root cause
	// ("" for none).
	Runbook func(llmdiagv1.Cause) string
	// Window is the verdict's window ("" for the service's default).
	Window string

	// MaxBodyBytes bounds a request body; MaxAlerts the alerts of one
	// message.
	MaxBodyBytes int64
	MaxAlerts    int
	// IntakeQueue bounds the messages accepted and not yet processed;
	// Workers process them.
	IntakeQueue int
	Workers     int
	// DedupWindow is how long an alert's fingerprint and status are
	// remembered; DedupMax bounds how many are (the oldest go first).
	DedupWindow time.Duration
	DedupMax    int
	// IndexTTL is how long the node index read from ListNodes is used;
	// MaxIndexNodes bounds it.
	IndexTTL      time.Duration
	MaxIndexNodes int
	// DiagnoseTimeout bounds one DiagnoseNode call.
	DiagnoseTimeout time.Duration

	// SinkQueue bounds each sink's queue of notifications.
	SinkQueue int
	// AttemptTimeout bounds one POST; MaxAttempts and MaxElapsed (from
	// the first attempt) bound the retries of one notification, which
	// wait BackoffBase·2^(n-1), at most BackoffMax, between half and all
	// of it (jitter).
	AttemptTimeout time.Duration
	MaxAttempts    int
	MaxElapsed     time.Duration
	BackoffBase    time.Duration
	BackoffMax     time.Duration

	// Clock defaults to the wall clock; Jitter, returning [0, 1), to
	// math/rand/v2.
	Clock  Clock
	Jitter func() float64
}

func (o *Options) defaults() {
	if len(o.NodeLabels) == 0 {
		o.NodeLabels = []string{"instance", "node"}
	}
	o.MaxBodyBytes = cmp.Or(o.MaxBodyBytes, DefaultMaxBodyBytes)
	o.MaxAlerts = cmp.Or(o.MaxAlerts, DefaultMaxAlerts)
	o.IntakeQueue = cmp.Or(o.IntakeQueue, DefaultIntakeQueue)
	o.Workers = cmp.Or(o.Workers, DefaultWorkers)
	o.DedupWindow = cmp.Or(o.DedupWindow, DefaultDedupWindow)
	o.DedupMax = cmp.Or(o.DedupMax, DefaultDedupMax)
	o.IndexTTL = cmp.Or(o.IndexTTL, DefaultIndexTTL)
	o.MaxIndexNodes = cmp.Or(o.MaxIndexNodes, DefaultMaxIndexNodes)
	o.DiagnoseTimeout = cmp.Or(o.DiagnoseTimeout, DefaultDiagnoseTimeout)
	o.SinkQueue = cmp.Or(o.SinkQueue, DefaultSinkQueue)
	o.AttemptTimeout = cmp.Or(o.AttemptTimeout, DefaultAttemptTimeout)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, DefaultMaxAttempts)
	o.MaxElapsed = cmp.Or(o.MaxElapsed, DefaultMaxElapsed)
	o.BackoffBase = cmp.Or(o.BackoffBase, DefaultBackoffBase)
	o.BackoffMax = cmp.Or(o.BackoffMax, DefaultBackoffMax)
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
}

func (o *Options) check() error {
	switch {
	case o.MaxBodyBytes < 0, o.MaxAlerts < 0, o.IntakeQueue < 0, o.Workers < 0, o.DedupMax < 0,
		o.MaxIndexNodes < 0, o.SinkQueue < 0, o.MaxAttempts < 0:
		return errors.New("alerts: negative limit in options")
	case o.DedupWindow < 0, o.IndexTTL < 0, o.DiagnoseTimeout < 0, o.AttemptTimeout < 0,
		o.MaxElapsed < 0, o.BackoffBase < 0, o.BackoffMax < 0:
		return errors.New("alerts: negative duration in options")
	}
	return nil
}

// Notification is one alert as a sink receives it: the alert, the node it
// was matched to and that node's verdict, or a note saying why there is
// none.
type Notification struct {
	Alert template.Alert
	// Receiver, GroupKey and ExternalURL are the message's.
	Receiver    string
	GroupKey    string
	ExternalURL string
	// Node is the llmdiag node the alert was matched to, "" if none.
	Node string
	// Diagnosis is the node's verdict in the sink's language, nil if none.
	Diagnosis *llmdiagv1.Diagnosis
	// Note says, in the sink's language, why there is no verdict.
	Note string
	// RunbookURL is the runbook of the verdict's root cause, if any.
	RunbookURL string
}

// Receiver is the Alertmanager webhook receiver: an http.Handler for POST
// /alertmanager, whose work Run does.
type Receiver struct {
	svc     Service
	log     *slog.Logger
	opts    Options
	senders []*sender
	langs   []llmdiagv1.Language // the sinks' languages, each once
	index   *nodeIndex
	dedup   *dedup
	intake  chan job
	m       *metrics
}

// job is one accepted message and its alerts that were not duplicates.
type job struct {
	msg    *Message
	alerts []template.Alert
}

// New returns a receiver forwarding to sinks. Metrics are registered on
// reg; client makes the sinks' requests (its own Timeout, if any, also
// applies). Webhook URLs are never logged.
func New(svc Service, sinks []Sink, log *slog.Logger, reg prometheus.Registerer, client *http.Client, opts Options) (*Receiver, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts.defaults()
	if svc == nil || log == nil || reg == nil || client == nil {
		return nil, errors.New("alerts: New needs a service, a logger, a registerer and an HTTP client")
	}
	if len(sinks) == 0 {
		return nil, errors.New("alerts: no sink")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	r := &Receiver{
		svc: svc, log: log, opts: opts, m: m,
		index:  &nodeIndex{svc: svc, clock: opts.Clock, ttl: opts.IndexTTL, max: opts.MaxIndexNodes, timeout: opts.DiagnoseTimeout},
		dedup:  newDedup(opts.DedupWindow, opts.DedupMax),
		intake: make(chan job, opts.IntakeQueue),
	}
	names := map[string]bool{}
	for _, s := range sinks {
		if err := s.Check(); err != nil {
			return nil, err
		}
		if names[s.Name] {
			return nil, fmt.Errorf("alerts: two sinks named %q", s.Name)
		}
		names[s.Name] = true
		if !containsLang(r.langs, s.Language) {
			r.langs = append(r.langs, s.Language)
		}
		r.senders = append(r.senders, newSender(s, client, log, m, opts))
	}
	return r, nil
}

func containsLang(ls []llmdiagv1.Language, l llmdiagv1.Language) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// Run processes accepted messages and delivers notifications until ctx is
// done; notifications still queued then are dropped (and counted as
// llmdiag_alert_sink_dropped_total{limit="shutdown"}), messages not yet
// processed are logged.
func (r *Receiver) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range r.senders {
		wg.Go(func() { s.run(ctx) })
	}
	for range r.opts.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-r.intake:
					r.process(ctx, j)
				}
			}
		})
	}
	wg.Wait()
	if n := len(r.intake); n > 0 {
		r.log.Warn("alerts: shutting down; dropped messages not yet processed", "count", n)
	}
}

// ServeHTTP accepts one webhook message: 202 with what was accepted, 400
// naming the field that is wrong, 413 for a body over the limit, 503 when
// the intake queue is full.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST Alertmanager's webhook payload here", http.StatusMethodNotAllowed)
		return
	}
	body := http.MaxBytesReader(w, req.Body, r.opts.MaxBodyBytes)
	var m Message
	dec := json.NewDecoder(body)
	if err := dec.Decode(&m); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			r.m.messages.WithLabelValues("too_large").Inc()
			http.Error(w, fmt.Sprintf("body: more than %d bytes (the receiver's limit); set max_alerts in the webhook_config", r.opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		r.m.messages.WithLabelValues("invalid").Inc()
		http.Error(w, "body: not Alertmanager's webhook JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := m.validate(r.opts.MaxAlerts); err != nil {
		r.m.messages.WithLabelValues("invalid").Inc()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := r.opts.Clock.Now()
	var fresh []template.Alert
	var keys []string
	for _, a := range m.Alerts {
		k := dedupKey(a)
		if !r.dedup.admit(k, now) {
			r.m.alerts.WithLabelValues("duplicate").Inc()
			continue
		}
		fresh = append(fresh, a)
		keys = append(keys, k)
	}
	dups := len(m.Alerts) - len(fresh)
	if len(fresh) > 0 {
		select {
		case r.intake <- job{msg: &m, alerts: fresh}:
		default:
			for _, k := range keys {
				r.dedup.forget(k)
			}
			r.m.messages.WithLabelValues("queue_full").Inc()
			r.log.Warn("alertmanager message refused: intake queue full", "limit", "intake queue", "capacity", r.opts.IntakeQueue, "alerts", len(fresh))
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("intake queue full (%d messages, the receiver's limit); retry later", r.opts.IntakeQueue), http.StatusServiceUnavailable)
			return
		}
		r.m.alerts.WithLabelValues("accepted").Add(float64(len(fresh)))
	}
	r.m.messages.WithLabelValues("accepted").Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "{\"accepted\":%d,\"duplicates\":%d}\n", len(fresh), dups)
}

// dedupKey is an alert's fingerprint (or, without one, its labels), status
// and start: Alertmanager's resends of a group repeat all three, while an
// alert that resolved and fires again starts anew and is forwarded.
func dedupKey(a template.Alert) string {
	fp := a.Fingerprint
	if fp == "" {
		var b strings.Builder
		for _, p := range a.Labels.SortedPairs() {
			b.WriteString(p.Name + "=" + p.Value + "\xff")
		}
		fp = b.String()
	}
	return fp + "\x00" + a.Status + "\x00" + a.StartsAt.UTC().Format(time.RFC3339Nano)
}

// verdict is one node's diagnosis in one language, or why there is none.
type verdict struct {
	d    *llmdiagv1.Diagnosis
	note string
}

// process matches a job's alerts, diagnoses their nodes (once per node and
// language) and queues a notification per alert and sink.
func (r *Receiver) process(ctx context.Context, j job) {
	idx, idxErr := r.index.get(ctx)
	if idxErr != nil {
		r.log.Warn("alerts: node index unavailable; alerts go out without verdicts", "err", idxErr)
	}
	type key struct {
		node string
		lang llmdiagv1.Language
	}
	memo := map[key]verdict{}
	for _, a := range j.alerts {
		var node string
		var m match
		if idxErr == nil {
			m = idx.match(a.Labels, r.opts.NodeLabels)
			node = m.node
			if node == "" {
				r.m.unmatched.Inc()
			}
		}
		byLang := map[llmdiagv1.Language]verdict{}
		for _, lang := range r.langs {
			switch {
			case idxErr != nil:
				byLang[lang] = verdict{note: noteIndex(lang)}
			case node == "":
				byLang[lang] = verdict{note: noteUnmatched(lang, m, r.opts.NodeLabels)}
			default:
				k := key{node, lang}
				v, ok := memo[k]
				if !ok {
					v = r.diagnose(ctx, node, lang)
					memo[k] = v
				}
				byLang[lang] = v
			}
		}
		for _, s := range r.senders {
			v := byLang[s.sink.Language]
			n := &Notification{
				Alert: a, Receiver: j.msg.Receiver, GroupKey: j.msg.GroupKey, ExternalURL: j.msg.ExternalURL,
				Node: node, Diagnosis: v.d, Note: v.note,
			}
			if v.d != nil && r.opts.Runbook != nil {
				n.RunbookURL = r.opts.Runbook(v.d.GetRootCause())
			}
			s.push(n)
		}
	}
}

// diagnose asks the service for node's verdict.
func (r *Receiver) diagnose(ctx context.Context, node string, lang llmdiagv1.Language) verdict {
	ctx, cancel := context.WithTimeout(ctx, r.opts.DiagnoseTimeout)
	defer cancel()
	resp, err := r.svc.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{
		Node: node, Window: r.opts.Window, Language: lang, Format: llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT,
	}))
	if err != nil {
		r.log.Warn("alerts: diagnose failed; the alert goes out without a verdict", "node", node, "err", err)
		return verdict{note: noteDiagnoseFailed(lang, node, err)}
	}
	return verdict{d: resp.Msg.GetDiagnosis()}
}
