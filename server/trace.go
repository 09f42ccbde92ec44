package server

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/tracing"
)

// The store reads of an RPC, each a span under the RPC's when the RPC is
// traced (serve's tracing interceptor; package tracing), and a plain call
// otherwise.

func (s *Service) get(ctx context.Context, node string) (*store.Record, error) {
	ctx, span := tracing.Child(ctx, "store.get")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("llmdiag.node", node))
	}
	rec, err := s.st.Get(ctx, node)
	tracing.End(span, failed(err))
	return rec, err
}

func (s *Service) list(ctx context.Context) ([]*store.Record, error) {
	ctx, span := tracing.Child(ctx, "store.list")
	recs, err := s.st.List(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("llmdiag.records", len(recs)))
	}
	tracing.End(span, err)
	return recs, err
}

func (s *Service) history(ctx context.Context, node string) ([]diagnose.Point, error) {
	ctx, span := tracing.Child(ctx, "store.history")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("llmdiag.node", node))
	}
	points, err := s.st.History(ctx, node)
	tracing.End(span, failed(err))
	return points, err
}

// failed is err unless it is a node not found: an answer, not a failure of
// the store.
func failed(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
