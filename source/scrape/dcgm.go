package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/sample"
)

// gpuRead is what a scrape of a node's DCGM exporter (fleet.Node.DCGM)
// gave: the GPU figures, or nil and why not.
type gpuRead struct {
	gpu      *llmdiagv1.GPUMetrics
	warnings []string
}

// into adds r to the node's sample. A DCGM exporter that fails leaves the
// GPU figures absent with a warning, never an error: the engine's own
// figures are whole without it.
func (r gpuRead) into(smp *sample.Sample) {
	smp.GPU = r.gpu
	smp.Warnings = append(smp.Warnings, r.warnings...)
}

// scrapeDCGM reads t's DCGM exporter within ctx's deadline, with the
// limits of an engine's /metrics, and aggregates its GPUs
// (engine.ExtractGPU). It never fails: problems become warnings.
func (s *Scraper) scrapeDCGM(ctx context.Context, t fleet.Node) gpuRead {
	where := redact.URL(t.DCGM)
	fail := func(err error) gpuRead {
		s.log.Debug("dcgm scrape failed", "node", t.ID, "url", where, "err", err)
		return gpuRead{warnings: []string{fmt.Sprintf("dcgm %s: %v: no GPU figures", where, err)}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.DCGM, nil)
	if err != nil {
		return fail(fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	client := s.noFollow
	if t.FollowRedirects {
		client = s.client
	}
	resp, err := client.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return fail(fmt.Errorf("no answer within %s", s.opts.Timeout))
	}
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(errors.New(notOK(req, resp, t.FollowRedirects)))
	}
	if ct := mediaType(resp.Header); !exposition[ct] {
		return fail(fmt.Errorf("HTTP 200 with content type %s, not a Prometheus text exposition", ct))
	}
	release, err := s.acquire(ctx, t.ID)
	if err != nil {
		return fail(err)
	}
	defer release()
	lr := &countingReader{r: io.LimitReader(resp.Body, s.opts.MaxBodyBytes+1)}
	exp, err := engine.Parse(lr, engine.Limits{MaxSeries: s.opts.MaxSeries, MaxRankValues: s.opts.MaxRankValues})
	if lr.n > s.opts.MaxBodyBytes {
		err = fmt.Errorf("body exceeds %d bytes", s.opts.MaxBodyBytes)
	}
	if err != nil {
		return fail(fmt.Errorf("parse: %w", withFlag(err)))
	}
	gpu, warnings := engine.ExtractGPU(exp.Families)
	out := gpuRead{gpu: gpu}
	for _, w := range append(exp.Warnings, warnings...) {
		out.warnings = append(out.warnings, fmt.Sprintf("dcgm %s: %s", where, w))
	}
	if gpu == nil {
		out.warnings = append(out.warnings, fmt.Sprintf("dcgm %s: no DCGM_FI_* family: no GPU figures", where))
	}
	return out
}
