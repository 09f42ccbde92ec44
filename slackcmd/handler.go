package slackcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/slack-go/slack"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Service is what the commands call: the unary methods of
// llmdiagv1connect.DiagnosisServiceHandler, which its client shares.
type Service interface {
	ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error)
	DiagnoseNode(context.Context, *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error)
	ComparePercentiles(context.Context, *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error)
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes      = 32 << 10
	DefaultTolerance         = 5 * time.Minute
	DefaultMaxReplayEntries  = 10000
	DefaultInlineDeadline    = 2500 * time.Millisecond
	DefaultCommandTimeout    = 20 * time.Second
	DefaultMaxJobs           = 8
	DefaultDeliveryAttempts  = 3
	DefaultDeliveryTimeout   = 5 * time.Second
	DefaultDeliveryBackoff   = 500 * time.Millisecond
	DefaultResponseURLPrefix = "https://hooks.slack.com/"
)

// maxTolerance is slack.NewSecretsVerifier's own limit on a timestamp's age:
// a longer tolerance here would not be honoured.
const maxTolerance = 5 * time.Minute

// Config configures a Handler. Zero values take the defaults.
type Config struct {
	// Service answers the commands. Required.
	Service Service
	// Secret returns the app's signing secret; it is called for every
	// request, so a rotated secret takes effect without a restart. Required.
	Secret func() (string, error)
	// MaxBodyBytes bounds a request body (default 32 KiB).
	MaxBodyBytes int64
	// Tolerance is how far a request's timestamp may be from Now (default
	// and at most 5 min): older ones are refused as stale, and the
	// signatures seen are remembered this long to refuse replays.
	Tolerance time.Duration
	// MaxReplayEntries bounds the signatures remembered (default 10000);
	// while it is full of signatures younger than Tolerance, requests are
	// refused rather than let a replay through.
	MaxReplayEntries int
	// InlineDeadline is how long a command may take to be answered in the
	// response (default 2.5 s, under Slack's 3 s); slower ones are answered
	// at the response_url.
	InlineDeadline time.Duration
	// CommandTimeout bounds a command answered later (default 20 s).
	CommandTimeout time.Duration
	// MaxJobs bounds the commands running at once, inline or not (default 8).
	MaxJobs int
	// DeliveryAttempts (default 3), DeliveryTimeout (per attempt, default
	// 5 s) and DeliveryBackoff (before the second attempt, doubling after,
	// default 500 ms) bound posting an answer to a response_url.
	DeliveryAttempts int
	DeliveryTimeout  time.Duration
	DeliveryBackoff  time.Duration
	// ResponseURLPrefix is where answers may be posted (default
	// https://hooks.slack.com/): a response_url must have its scheme and
	// host and lie under its path.
	ResponseURLPrefix string
	// Client posts to response_urls (default: a new http.Client); it is used
	// with redirects off.
	Client *http.Client
	// Now is the clock timestamps are checked against (default time.Now).
	Now func() time.Time
	// Log receives refusals and failed deliveries (default: discarded).
	Log *slog.Logger
}

// Handler serves the slash command. Close it to stop the answers still
// being worked on.
type Handler struct {
	cfg    Config
	prefix *url.URL
	client *http.Client
	seen   *replaySet
	jobs   chan struct{}
	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler for cfg, or an error naming the field that is wrong.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil {
		return nil, errors.New("slackcmd: Service is required")
	}
	if cfg.Secret == nil {
		return nil, errors.New("slackcmd: Secret is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Tolerance, DefaultTolerance)
	def(&cfg.InlineDeadline, DefaultInlineDeadline)
	def(&cfg.CommandTimeout, DefaultCommandTimeout)
	def(&cfg.DeliveryTimeout, DefaultDeliveryTimeout)
	def(&cfg.DeliveryBackoff, DefaultDeliveryBackoff)
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxReplayEntries == 0 {
		cfg.MaxReplayEntries = DefaultMaxReplayEntries
	}
	if cfg.MaxJobs == 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if cfg.DeliveryAttempts == 0 {
		cfg.DeliveryAttempts = DefaultDeliveryAttempts
	}
	if cfg.ResponseURLPrefix == "" {
		cfg.ResponseURLPrefix = DefaultResponseURLPrefix
	}
	switch {
	case cfg.Tolerance < 0 || cfg.Tolerance > maxTolerance:
		return nil, fmt.Errorf("slackcmd: Tolerance %v: want at most %v (slack-go's own limit)", cfg.Tolerance, maxTolerance)
	case cfg.InlineDeadline < 0 || cfg.InlineDeadline >= 3*time.Second:
		return nil, fmt.Errorf("slackcmd: InlineDeadline %v: want below Slack's 3s", cfg.InlineDeadline)
	case cfg.MaxBodyBytes < 0, cfg.MaxReplayEntries < 0, cfg.MaxJobs < 0, cfg.DeliveryAttempts < 0,
		cfg.CommandTimeout < 0, cfg.DeliveryTimeout < 0, cfg.DeliveryBackoff < 0:
		return nil, errors.New("slackcmd: MaxBodyBytes, MaxReplayEntries, MaxJobs, DeliveryAttempts and the timeouts must not be negative")
	}
	prefix, err := parsePrefix(cfg.ResponseURLPrefix)
	if err != nil {
		return nil, fmt.Errorf("slackcmd: ResponseURLPrefix: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	client := &http.Client{}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	// A redirect would take the answer to a host the prefix does not allow.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	base, stop := context.WithCancel(context.Background())
	return &Handler{
		cfg: cfg, prefix: prefix, client: client,
		seen: newReplaySet(cfg.MaxReplayEntries),
		jobs: make(chan struct{}, cfg.MaxJobs),
		base: base, stop: stop,
	}, nil
}

// Close cancels the commands and deliveries still running and waits for
// them to end. Call it once the server sends no more requests (serve: after
// its graceful shutdown).
func (h *Handler) Close() {
	h.stop()
	h.wg.Wait()
}

// refusal is a request turned away before it is parsed.
type refusal struct {
	code   int
	reason string
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, f refusal) {
	h.cfg.Log.Warn("slack command refused", "reason", f.reason, "status", f.code, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(f.code)
	io.WriteString(w, f.reason+"\n")
}

// ServeHTTP checks the request is Slack's, then runs its command.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, r, refusal{http.StatusMethodNotAllowed, "method " + r.Method + " not allowed: Slack POSTs its commands"})
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		h.refuse(w, r, refusal{http.StatusUnsupportedMediaType, "content type must be application/x-www-form-urlencoded"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refuse(w, r, refusal{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over the %d-byte limit", h.cfg.MaxBodyBytes)})
			return
		}
		h.refuse(w, r, refusal{http.StatusBadRequest, "body unreadable"})
		return
	}
	if f := h.verify(r.Header, body); f != nil {
		h.refuse(w, r, *f)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		h.refuse(w, r, refusal{http.StatusBadRequest, "body is not a form"})
		return
	}
	req := request{
		cmd:         parse(form.Get("text")),
		name:        commandName(form.Get("command")),
		responseURL: form.Get("response_url"),
	}
	writeMessage(w, h.answer(r.Context(), req))
}

// verify checks that header and body are a request Slack signed within the
// tolerance and that it is not a replay; nil when it is.
func (h *Handler) verify(header http.Header, body []byte) *refusal {
	sig, ts := header.Get("X-Slack-Signature"), header.Get("X-Slack-Request-Timestamp")
	if sig == "" || ts == "" {
		return &refusal{http.StatusUnauthorized, "missing X-Slack-Signature or X-Slack-Request-Timestamp"}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return &refusal{http.StatusUnauthorized, "malformed X-Slack-Request-Timestamp"}
	}
	now := h.cfg.Now()
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > h.cfg.Tolerance || d < -h.cfg.Tolerance {
		return &refusal{http.StatusUnauthorized, fmt.Sprintf("stale timestamp: more than %v from this server's clock", h.cfg.Tolerance)}
	}
	secret, err := h.cfg.Secret()
	if err != nil || secret == "" {
		// The error names the file, never its content.
		h.cfg.Log.Error("slack signing secret unavailable", "err", err)
		return &refusal{http.StatusServiceUnavailable, "signing secret unavailable"}
	}
	v, err := slack.NewSecretsVerifier(header, secret)
	if err == nil {
		_, err = v.Write(body)
	}
	if err == nil {
		err = v.Ensure()
	}
	switch {
	case errors.Is(err, slack.ErrExpiredTimestamp):
		// slack-go reads the wall clock: our check above read Now.
		return &refusal{http.StatusUnauthorized, "stale timestamp: more than 5m from this server's wall clock"}
	case err != nil:
		return &refusal{http.StatusUnauthorized, "invalid signature"}
	}
	switch h.seen.add(strings.ToLower(sig), now, at.Add(h.cfg.Tolerance)) {
	case replayed:
		return &refusal{http.StatusUnauthorized, "replayed request: this signature was already accepted"}
	case full:
		return &refusal{http.StatusServiceUnavailable, fmt.Sprintf("replay protection full: %d signatures within %v (limit MaxReplayEntries)", h.cfg.MaxReplayEntries, h.cfg.Tolerance)}
	}
	return nil
}

// request is a verified command.
type request struct {
	cmd command
	// name is the slash command as the workspace named it, for the usage.
	name        string
	responseURL string
}

// answer runs req's command and returns the message to answer with: the
// command's own when it finishes within the inline deadline, else an
// acknowledgement, the command's message then going to the response_url.
func (h *Handler) answer(ctx context.Context, req request) *Message {
	if req.cmd.kind == kindHelp {
		return helpMessage(req.name, req.cmd.problem)
	}
	select {
	case h.jobs <- struct{}{}:
	default:
		return textMessage(fmt.Sprintf(":hourglass: llmdiag is busy: %d commands are already running (its limit). Try again in a moment.", h.cfg.MaxJobs))
	}
	target, urlErr := h.allowed(req.responseURL)
	done := make(chan *Message)
	late := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer func() { <-h.jobs }()
		cctx, cancel := context.WithTimeout(h.base, h.cfg.CommandTimeout)
		msg := run(cctx, h.cfg.Service, req)
		cancel()
		select {
		case done <- msg:
			return
		case <-late:
		}
		if urlErr != nil {
			h.cfg.Log.Warn("slack command answer dropped: too slow to answer inline, and its response_url is refused", "command", req.cmd.kind, "reason", urlErr.Error())
			return
		}
		if err := h.deliver(h.base, target, msg); err != nil {
			h.cfg.Log.Warn("slack command answer not delivered", "command", req.cmd.kind, "host", target.Host, "err", err)
		}
	}()
	t := time.NewTimer(h.cfg.InlineDeadline)
	defer t.Stop()
	select {
	case msg := <-done:
		return msg
	case <-t.C:
	case <-ctx.Done():
	}
	close(late)
	if urlErr != nil {
		return textMessage(fmt.Sprintf(":warning: `%s` took longer than %v, and its answer cannot follow: %s.", escape(req.cmd.String()), h.cfg.InlineDeadline, urlErr))
	}
	return textMessage(fmt.Sprintf(":hourglass_flowing_sand: Working on `%s`; the answer follows here.", escape(req.cmd.String())))
}

// writeMessage answers with msg as JSON.
func writeMessage(w http.ResponseWriter, msg *Message) {
	b, err := encode(msg)
	if err != nil {
		http.Error(w, "cannot encode the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
