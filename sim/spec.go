package sim

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
)

// SpecDecode is speculative decoding on a node's engine cores: each step a
// draft model proposes DraftTokens tokens for every decoding request, which
// the target model verifies in the same forward pass. Each draft token is
// accepted with probability AcceptRate given that those before it were;
// the step then emits the accepted tokens and one of the target model's
// own, so a request advances 1 + accepted tokens per step, on average
// (1 − a^(k+1)) / (1 − a) for k draft tokens and acceptance a.
//
// The cost, in the terms of Perf: the weights are read once per step as
// without it (decode is memory-bound: the gain), the per-sequence compute
// is paid for every verified token (1 + k per request), and the draft
// model runs k passes of DraftCost × StepBase each before the step.
type SpecDecode struct {
	// DraftTokens is k, the tokens proposed per request and step
	// (num_speculative_tokens).
	DraftTokens int
	// AcceptRate is the probability that a draft token is accepted when
	// the ones before it were, in [0, 1].
	AcceptRate float64
	// DraftCost is one draft pass as a fraction of Perf.StepBase; 0 means
	// 0.1 (a draft model a tenth of the target's weights, or an EAGLE
	// head).
	DraftCost float64
}

// defaultDraftCost is SpecDecode.DraftCost when 0.
const defaultDraftCost = 0.1

func (s *SpecDecode) validate() error {
	switch {
	case s.DraftTokens < 1:
		return errors.New("spec decode: draft tokens must be at least 1")
	case !(s.AcceptRate >= 0 && s.AcceptRate <= 1):
		return errors.New("spec decode: accept rate must be in [0, 1]")
	case !(s.DraftCost >= 0):
		return errors.New("spec decode: draft cost must not be negative")
	}
	return nil
}

// LoRA is the LoRA adapters a node serves: every request names one of
// Adapters, drawn uniformly, and a request is admitted only while its
// adapter is in the running batch or fewer than MaxLoaded adapters are
// (vLLM's max_loras): the others wait, and the scheduler admits the
// requests behind them whose adapter is there.
type LoRA struct {
	// Adapters are the adapters' names (no commas).
	Adapters []string
	// MaxLoaded is the most adapters the running batch may hold at once.
	MaxLoaded int
}

func (l *LoRA) validate() error {
	if len(l.Adapters) == 0 || l.MaxLoaded < 1 {
		return errors.New("lora: want adapters and max loaded of at least 1")
	}
	for _, a := range l.Adapters {
		if a == "" || strings.ContainsAny(a, ", ") {
			return errors.New("lora: adapter names must be non-empty, without commas or spaces")
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(l.Adapters)))) != len(l.Adapters) {
		return errors.New("lora: adapter names must be distinct")
	}
	return nil
}

// speculator is a core's speculative decoding; nil without it.
type speculator struct {
	k      int
	accept float64
	draft  float64 // seconds of one draft pass
	rng    *rand.Rand
}

// tokens is what a decoding request r schedules in a step: itself and its
// draft tokens, never more than it has left to generate.
func (s *speculator) tokens(r *request) int {
	if s == nil {
		return 1
	}
	return 1 + max(min(s.k, r.output-r.generated-1), 0)
}

// accepted draws the draft tokens accepted out of k: those before the
// first rejection.
func (s *speculator) accepted(k int) int {
	a := 0
	for a < k && s.rng.Float64() < s.accept {
		a++
	}
	return a
}

// specRecorder is a recorder of an engine that reports speculative
// decoding: drafts proposed (one per request and step), draft tokens and
// accepted tokens of one iteration ending at now.
type specRecorder interface {
	spec(core, drafts, draftTokens, accepted int, now float64)
}

// loras are a core's LoRA adapters; nil without them.
type loras struct {
	names   []string
	max     int
	running []int // running requests per adapter
	loaded  int   // adapters with a running request
}

// fits reports whether r may join the running batch: no adapter, its
// adapter already there, or room for one more.
func (l *loras) fits(r *request) bool {
	return l == nil || r.adapter < 0 || l.running[r.adapter] > 0 || l.loaded < l.max
}

// add and remove count r in and out of the running batch.
func (l *loras) add(r *request) {
	if l == nil || r.adapter < 0 {
		return
	}
	if l.running[r.adapter]++; l.running[r.adapter] == 1 {
		l.loaded++
	}
}

func (l *loras) remove(r *request) {
	if l == nil || r.adapter < 0 {
		return
	}
	if l.running[r.adapter]--; l.running[r.adapter] == 0 {
		l.loaded--
	}
}

// lists are the adapters with requests running and those waiting
// requests name (an adapter may be in both), comma-separated in adapter
// order, as vLLM's lora_requests_info labels them.
func (l *loras) lists(waiting []*request) (running, waits string) {
	var run, wait []string
	want := make([]bool, len(l.names))
	for _, r := range waiting {
		if r.adapter >= 0 {
			want[r.adapter] = true
		}
	}
	for i, name := range l.names {
		if l.running[i] > 0 {
			run = append(run, name)
		}
		if want[i] {
			wait = append(wait, name)
		}
	}
	return strings.Join(run, ","), strings.Join(wait, ",")
}
