package promfake_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promfake"
)

// TestPromfakeChild serves for TestStartChild, in the child process.
func TestPromfakeChild(t *testing.T) { promfake.ServeChild(t) }

var queries = []promfake.Query{
	{Expr: "identity", Engine: llmdiagv1.Engine_ENGINE_VLLM, Shape: "identity"},
	{Expr: "ttft", Engine: llmdiagv1.Engine_ENGINE_VLLM, Shape: "buckets", Concept: engine.TTFT},
}

// query asks u for expr evaluated at at and returns the answer.
func query(t *testing.T, u, expr string, at time.Time) []byte {
	t.Helper()
	resp, err := http.PostForm(u+"/api/v1/query", url.Values{"query": {expr}, "time": {strconv.FormatInt(at.Unix(), 10)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, %v", expr, resp.StatusCode, err)
	}
	return b
}

// TestStartChild: a child serves the answers Synth renders, at each
// query's time, and an empty vector for other queries.
func TestStartChild(t *testing.T) {
	nodes := promfake.Fleet(3, true)
	u := promfake.StartChild(t, "TestPromfakeChild", promfake.Spec{Queries: queries, Nodes: nodes})
	synth := promfake.NewSynth(queries, nodes)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{t0, t0.Add(5 * time.Second)} {
		want := synth.At(at)
		for _, q := range queries {
			if got := query(t, u, q.Expr, at); !bytes.Equal(got, want[q.Expr].Body) {
				t.Errorf("%s at %v:\n got %s\nwant %s", q.Expr, at, got, want[q.Expr].Body)
			}
		}
	}
	if got := query(t, u, "other", t0); !bytes.Equal(got, promfake.EmptyVector.Body) {
		t.Errorf("an unknown query got %s", got)
	}
	// The time moves the timestamps and the last scrape, not the values.
	a, b := synth.At(t0)["identity"].Body, synth.At(t0.Add(time.Second))["identity"].Body
	scrape := `"` + strconv.FormatFloat(float64(t0.Unix()-2), 'g', -1, 64) + `"`
	if bytes.Equal(a, b) || !bytes.Contains(a, []byte(scrape)) {
		t.Errorf("identity does not follow the time:\n%s\n%s", a, b)
	}
}
