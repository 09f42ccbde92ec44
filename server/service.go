package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fanout"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
)

// Config configures the service.
type Config struct {
	// DefaultWindow is the refresh's window (default
	// metrics.DefaultWindow); requests naming it (or none) are answered
	// from the store.
	DefaultWindow metrics.Window
	// StaleAfter marks data stale (and verdicts UNKNOWN) when older.
	StaleAfter time.Duration
	Thresholds diagnose.Thresholds
	// MaxCompareSubjects bounds the nodes one comparison reads, and the nodes
	// one stream may select (default 1000).
	MaxCompareSubjects int
	// MinHeartbeat is the shortest heartbeat_interval a stream may ask for
	// (default DefaultMinHeartbeat).
	MinHeartbeat time.Duration
	// OffsetStep, when positive, is the finest step offsets are rounded to
	// before they key the query cache and the source's reads (see
	// onDemandStep): for a source whose reads cost queries. Zero reads
	// offsets as asked.
	OffsetStep time.Duration
	// RequestQueryBudget bounds the queries to the source's backend
	// (Prometheus) one request may cause; a request that would go past it
	// is refused with ResourceExhausted (default DefaultRequestQueryBudget).
	RequestQueryBudget int
	// SLOReads, when set, gives the SLO windows the refresh read for each
	// node's stored verdict (refresh.Loop): diagnoses made on demand of
	// data ending now reuse them (slo.go). Without it they are read from
	// the source when SLOs are configured.
	SLOReads SLOReads
	// Routable is GetRoutability's fallback when the data cannot say
	// (serve gives RoutableHandler the same).
	Routable RoutableFallback
}

// DefaultRequestQueryBudget is Config.RequestQueryBudget's default: room
// for the two fleet-wide reads a comparison with a baseline needs, each
// charged at its most (every engine's queries: 114 with the built-in
// table), twice over.
const DefaultRequestQueryBudget = 500

// budgetFlag names the flag that sets Config.RequestQueryBudget, for the
// errors that refuse a request over it.
const budgetFlag = "llmdiag serve --max-request-queries"

// Service implements DiagnosisService.
type Service struct {
	st  store.Store
	win source.Source
	log *slog.Logger
	now func() time.Time
	cfg Config
	// defaultWindow is cfg.DefaultWindow's canonical spelling.
	defaultWindow string
	// done is canceled on shutdown (the done channel NewService was given
	// closes) so streams end and clients reconnect.
	done context.Context
	// hub fans the health feed out to streams; started by the first one.
	hubOnce sync.Once
	hub     *fanout.Hub
	// ans holds the answers prepared at the store's current generation.
	ans answers
	// masks are the read masks parsed from requests (readmask.go).
	masks maskCache
}

var _ llmdiagv1connect.DiagnosisServiceHandler = (*Service)(nil)

// NewService returns the service. win may be nil when only the default
// window is available. done, when closed, ends open streams.
func NewService(st store.Store, win source.Source, log *slog.Logger, now func() time.Time, cfg Config, done <-chan struct{}) *Service {
	cfg.DefaultWindow = cfg.DefaultWindow.Or(metrics.DefaultWindow)
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 30 * time.Second
	}
	if cfg.MaxCompareSubjects <= 0 {
		cfg.MaxCompareSubjects = 1000
	}
	if cfg.RequestQueryBudget <= 0 {
		cfg.RequestQueryBudget = DefaultRequestQueryBudget
	}
	if cfg.MinHeartbeat <= 0 {
		cfg.MinHeartbeat = DefaultMinHeartbeat
	}
	defaultWindow := cfg.DefaultWindow.String()
	// One context for the whole service: a stream ties itself to it with
	// context.AfterFunc, which costs no goroutine per stream.
	doneCtx := context.Background()
	if done != nil {
		ctx, cancel := context.WithCancel(doneCtx)
		go func() {
			<-done
			cancel()
		}()
		doneCtx = ctx
	}
	return &Service{st: st, win: win, log: log, now: now, cfg: cfg, defaultWindow: defaultWindow, done: doneCtx}
}

// connectMessage is err's message without the code prefix a connect.Error
// adds.
func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// budgeted is ctx with the request's query budget (Config.RequestQueryBudget).
func (s *Service) budgeted(ctx context.Context) context.Context {
	return source.WithBudget(ctx, source.NewBudget(s.cfg.RequestQueryBudget))
}

// degrader is a store that answers from its own copy when the shared store
// it mirrors is unreachable (store/replica).
type degrader interface {
	Degraded() (reason string, age time.Duration, degraded bool)
}

// degraded says, for an answer, whether it comes from this replica's copy.
func (s *Service) degraded() *llmdiagv1.Degraded {
	d, ok := s.st.(degrader)
	if !ok {
		return nil
	}
	reason, age, yes := d.Degraded()
	if !yes {
		return nil
	}
	return &llmdiagv1.Degraded{Reason: reason, CopyAge: durationpb.New(age)}
}

func windowOr(w, def string) string {
	if w == "" {
		return def
	}
	return w
}

func invalid(field string, err error) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w", field, err))
}

func storeErr(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}
