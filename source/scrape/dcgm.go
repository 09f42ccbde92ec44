package scrape

import (
	"context"
	"errors"
	"fmt"

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
// (engine.ExtractPodGPU). It never fails: problems become warnings.
func (s *Scraper) scrapeDCGM(ctx context.Context, t fleet.Node) gpuRead {
	where := redact.URL(t.DCGM)
	fail := func(err error) gpuRead {
		s.log.Debug("dcgm scrape failed", "node", t.ID, "url", where, "err", err)
		return gpuRead{warnings: []string{fmt.Sprintf("dcgm %s: %v: no GPU figures", where, err)}}
	}
	exp, _, release, err := s.fetch(ctx, t.ID, t.DCGM, t.FollowRedirects, nil)
	var unreadable unreadableError
	if errors.As(err, &unreadable) {
		err = fmt.Errorf("parse: %w", err)
	}
	if err != nil {
		return fail(err)
	}
	defer release()
	// An exporter serving several engines' pods: the node's pod label
	// picks its GPUs (engine.NodePod).
	gpu, warnings := engine.ExtractPodGPU(exp.Families, engine.NodePod(t.Labels))
	out := gpuRead{gpu: gpu}
	for _, w := range append(exp.Warnings, warnings...) {
		out.warnings = append(out.warnings, fmt.Sprintf("dcgm %s: %s", where, w))
	}
	if gpu == nil && !engine.HasDCGMFamily(exp.Families) {
		out.warnings = append(out.warnings, fmt.Sprintf("dcgm %s: no DCGM_FI_* family: no GPU figures", where))
	}
	return out
}
