package refresh

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
)

// SLO windows: the SLO burn finding reads each node's latency histograms
// over the burn alerts' windows (diagnose.SLOWindows: 5m, 30m, 1h, 6h),
// which a refresh does not read. When SLOs are configured, the loop reads
// them through source.Source.Window, each window at its own cadence
// (SLOCadence), and keeps the last read of each node to pass as
// diagnose.Input.Windows until the next. Without SLOs nothing here runs.
//
// Cost: a Prometheus source reads a window for the whole fleet at once (the
// first node's Window sends the queries of a refresh over that window, the
// others are answered from that read), so a window costs one fleet-wide
// query set per cadence, not one per node: with the default 5s interval
// and 5m window, 30m twice a minute and 1h and 6h once a minute, a third
// more query sets than the refreshes alone. A direct scrape computes the
// windows from the samples it keeps, and sends nothing.

// SLOCadence is how often the loop reads an SLO window of length d with
// refreshes every interval: a sixtieth of the window, at least every
// refresh and at most a minute (5m: every refresh; 30m: 30s; 1h and 6h:
// 1m). Between reads the window moves by a sixtieth of itself or less,
// well within what a burn rate over it can tell.
func SLOCadence(d, interval time.Duration) time.Duration {
	return min(max(d/60, interval), time.Minute)
}

// SLORetention is how far back a source that keeps samples (a direct
// scrape: scrape.Options.LongRetention) must reach for the SLO windows of
// th: the longest of diagnose.SLOWindows, or 0 without SLOs.
func SLORetention(th diagnose.Thresholds) time.Duration {
	if len(th.SLOs.List()) == 0 {
		return 0
	}
	return slices.Max(diagnose.SLOWindows())
}

// sloKeep is how many cadences a node's last read of a window is used
// for: a read that fails keeps the one before for a while, and a node gone
// from the source is forgotten.
const sloKeep = 3

// sloWindows holds the SLO windows read for each node. Only the loop's
// cycle uses windows and nodes, under Loop.mu; used is also read by the
// service (Loop.SLOWindows), under mu.
type sloWindows struct {
	windows []sloWindow
	// nodes holds each node's reads, one per window, by node id.
	nodes map[string][]sloRead

	mu sync.Mutex
	// used holds, by node id, the windows each of the node's last two
	// diagnoses read, newest first: the last one's record may not be
	// stored yet when the service asks about the one before.
	used map[string][2]sloUsed
}

// sloUsed is the SLO windows one diagnosis of a node read.
type sloUsed struct {
	observedAt time.Time // of the metrics diagnosed
	windows    []*llmdiagv1.NodeMetrics
	set        bool
}

// sloWindow is one window the loop reads.
type sloWindow struct {
	name  string // metrics.FormatWindow spelling
	every time.Duration
	last  time.Time // of the last completed read round
}

// sloRead is one node's metrics over one window, trimmed to what the SLO
// finding reads.
type sloRead struct {
	m  *llmdiagv1.NodeMetrics
	at time.Time
}

// newSLOWindows returns the windows to read for thresholds th, refreshing
// every interval over window: nil when th has no SLOs. The refresh's own
// window is not read again.
func newSLOWindows(th diagnose.Thresholds, window string, interval time.Duration) *sloWindows {
	if len(th.SLOs.List()) == 0 {
		return nil
	}
	own, lifetime, err := metrics.ParseWindow(window)
	if err != nil || lifetime {
		own = -1
	}
	s := &sloWindows{nodes: map[string][]sloRead{}, used: map[string][2]sloUsed{}}
	for _, d := range diagnose.SLOWindows() {
		if d != own {
			s.windows = append(s.windows, sloWindow{name: metrics.FormatWindow(d), every: SLOCadence(d, interval)})
		}
	}
	return s
}

// read reads the windows due at now for the nodes of obs that an SLO
// applies to (model gives a node's model), within ctx. A window whose round
// ran out of time is due again at the next refresh (a Prometheus source's
// fleet-wide read goes on and is reused then); one whose reads failed
// otherwise waits for its next turn.
func (s *sloWindows) read(ctx context.Context, src source.Source, log *slog.Logger, now time.Time, obs []source.Observation, th diagnose.Thresholds, model func(source.Observation) string) {
	if s == nil {
		return
	}
	for i := range s.windows {
		w := &s.windows[i]
		if !w.last.IsZero() && now.Sub(w.last) < w.every {
			continue
		}
		var failed int
		var firstErr error
		complete := true
		for _, o := range obs {
			if o.Metrics == nil || !diagnose.HasSLO(th, model(o)) {
				continue
			}
			m, err := src.Window(ctx, o.Node.ID, w.name, 0)
			if err != nil {
				if ctx.Err() != nil {
					complete = false
					firstErr = err
					break
				}
				failed++
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			reads := s.nodes[o.Node.ID]
			if reads == nil {
				reads = make([]sloRead, len(s.windows))
				s.nodes[o.Node.ID] = reads
			}
			reads[i] = sloRead{m: trimSLO(m), at: now}
		}
		if complete {
			w.last = now
		}
		if firstErr != nil {
			level := slog.LevelDebug
			if !complete || errors.Is(firstErr, source.ErrOverBudget) {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "SLO window not read", "window", w.name, "failed", failed, "complete", complete, "err", firstErr)
		}
	}
	// Forget what is too old to use: nodes gone, reads failing.
	for id, reads := range s.nodes {
		alive := false
		for i := range reads {
			if reads[i].m != nil && now.Sub(reads[i].at) > sloKeep*s.windows[i].every {
				reads[i] = sloRead{}
			}
			alive = alive || reads[i].m != nil
		}
		if !alive {
			delete(s.nodes, id)
		}
	}
	// What the service may ask about: the nodes of this refresh.
	in := make(map[string]bool, len(obs))
	for _, o := range obs {
		in[o.Node.ID] = true
	}
	s.mu.Lock()
	for id := range s.used {
		if !in[id] {
			delete(s.used, id)
		}
	}
	s.mu.Unlock()
}

// of returns node's metrics over the SLO windows, for diagnose.Input.
func (s *sloWindows) of(node string) []*llmdiagv1.NodeMetrics {
	if s == nil {
		return nil
	}
	var out []*llmdiagv1.NodeMetrics
	for _, r := range s.nodes[node] {
		if r.m != nil {
			out = append(out, r.m)
		}
	}
	return out
}

// use returns node's metrics over the SLO windows for its diagnosis of the
// metrics observed at observedAt (of), and remembers them for the service
// (SLOWindows). The messages are not changed once read: the service's
// diagnoses read them concurrently.
func (s *sloWindows) use(node string, observedAt time.Time) []*llmdiagv1.NodeMetrics {
	if s == nil {
		return nil
	}
	w := s.of(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.used[node]
	s.used[node] = [2]sloUsed{{observedAt: observedAt, windows: w, set: true}, last[0]}
	return w
}

// SLOWindows returns the SLO windows (diagnose.Input.Windows) the loop's
// diagnosis of node's metrics observed at observedAt read, so that the
// service can diagnose the stored record again (in another language) with
// the same figures as the verdict stored beside it. ok is false when the
// loop holds no such diagnosis (no SLOs, a node it has not diagnosed at
// that observation, or one made by another replica): the caller reads the
// windows itself. The result is shared: do not change it. Safe for
// concurrent use with the loop's refreshes.
func (l *Loop) SLOWindows(node string, observedAt time.Time) (windows []*llmdiagv1.NodeMetrics, ok bool) {
	s := l.slo
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.used[node] {
		if u.set && u.observedAt.Equal(observedAt) {
			return u.windows, true
		}
	}
	return nil, false
}

// trimSLO keeps of m what the SLO finding reads: the window, what it
// covers, the model and the latency histograms.
func trimSLO(m *llmdiagv1.NodeMetrics) *llmdiagv1.NodeMetrics {
	return &llmdiagv1.NodeMetrics{
		Node:       m.GetNode(),
		Model:      m.GetModel(),
		Window:     m.GetWindow(),
		Covered:    m.GetCovered(),
		ObservedAt: m.GetObservedAt(),
		Ttft:       m.GetTtft(),
		InterToken: m.GetInterToken(),
		E2E:        m.GetE2E(),
	}
}

// forget drops what is held of a node that left the fleet.
func (s *sloWindows) forget(node string) {
	if s == nil {
		return
	}
	delete(s.nodes, node)
	s.mu.Lock()
	delete(s.used, node)
	s.mu.Unlock()
}
