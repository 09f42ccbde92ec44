package refresh

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store/memory"
)

// TestFastLaneSetNodes: a node added while the lane runs is read on its
// own schedule, one removed is read no more and its read in flight writes
// nothing.
func TestFastLaneSetNodes(t *testing.T) {
	var hits [2]atomic.Int64
	srv := func(i int) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits[i].Add(1)
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte("vllm:num_requests_waiting{model_name=\"m\"} 0\nvllm:num_requests_running{model_name=\"m\"} 1\n"))
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := srv(0), srv(1)
	f := newFastLane(FastConfig{Interval: 20 * time.Millisecond}, diagnose.DefaultThresholds(), DefaultMinScoreChange,
		memory.New(memory.Options{}, "t"), discard(), time.Now, map[string]fleet.Node{"a": {ID: "a", URL: a.URL, Engine: "vllm"}})
	base := func(id string) {
		n := f.node(id)
		n.mu.Lock()
		n.base = &fastBase{metrics: &llmdiagv1.NodeMetrics{Node: id, Engine: llmdiagv1.Engine_ENGINE_VLLM}, diag: &llmdiagv1.Diagnosis{}, node: &llmdiagv1.Node{Id: id}}
		n.mu.Unlock()
	}
	base("a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.run(ctx) }()
	defer func() { cancel(); <-done }()
	w := testkit.Wait{For: 10 * time.Second, Every: 10 * time.Millisecond}
	w.Until(t, "a read", func() bool { return hits[0].Load() > 0 })

	f.setNodes(map[string]fleet.Node{"b": {ID: "b", URL: b.URL, Engine: "vllm"}})
	if f.node("a") != nil || f.node("b") == nil || f.count() != 1 {
		t.Fatalf("after setNodes: a %v, b %v, count %d", f.node("a"), f.node("b"), f.count())
	}
	base("b")
	w.Until(t, "b read", func() bool { return hits[1].Load() > 0 })
	// a is read no more: after b's next few reads, a's count holds.
	aHits, bHits := hits[0].Load(), hits[1].Load()
	w.Until(t, "b read three more times", func() bool { return hits[1].Load() >= bHits+3 })
	if got := hits[0].Load(); got > aHits+1 { // one read may have been in flight
		t.Errorf("a read %d more times after it left the lane", got-aHits)
	}
}
