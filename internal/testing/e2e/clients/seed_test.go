package clients_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llmdiag/llmdiag/cli"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestSeedEndToEnd is `make run` in a test: the simulator's seed scenario,
// llmdiag serving it, and the CLI asking it.
func TestSeedEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the seed fleet served and asked end to end, waits for a decode-bound verdict")
	}
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	clitest.Sim(t, "seed", fleetPath)

	addr := testkit.FreeAddr(t)
	// Flags from the environment, as LLMDIAG_* variables.
	vars := map[string]string{"LLMDIAG_LISTEN": addr, "LLMDIAG_ADDR": "http://" + addr, "LLMDIAG_INTERVAL": "500ms"}
	serveLog := clitest.Background(t, vars, "serve", "--fleet", fleetPath)
	clitest.WaitFor(t, "the first verdicts", 30*time.Second, func() bool {
		out, _, err := clitest.Run(t, vars, "nodes")
		return err == nil && strings.Contains(out, "deepseek-v4-0")
	})
	// The window fills as refreshes accumulate; the seed's deepseek nodes
	// finish a request every few seconds, so the decode-bound verdict needs
	// a few of them.
	// (protojson varies its whitespace on purpose: parse, never grep.)
	var diag string
	resp := &llmdiagv1.DiagnoseNodeResponse{}
	clitest.WaitFor(t, "deepseek-v4-0 to be diagnosed decode-bound with the seed's E2E tail", 60*time.Second, func() bool {
		o, _, err := clitest.Run(t, vars, "diagnose", "deepseek-v4-0", "--format", "json")
		diag = o
		if err != nil || protojson.Unmarshal([]byte(o), resp) != nil {
			return false
		}
		d := resp.GetDiagnosis()
		// Past the first, lifetime-only refresh (rates known), and with the
		// long requests finished in the window that make the E2E tail the
		// seed reads: before that DECODE_BOUND rests on stalls between
		// tokens alone.
		return d.GetRootCause() == llmdiagv1.Cause_CAUSE_DECODE_BOUND && d.GetWindow() == "5m" &&
			len(d.GetFindings()) > 5 && d.GetFindings()[5].GetStatus() == llmdiagv1.Status_STATUS_WARN
	}, &diag)

	out, _, err := clitest.Run(t, vars, "nodes")
	if err != nil {
		t.Fatalf("nodes: %v", err)
	}
	for _, id := range []string{"deepseek-v4-0", "deepseek-v4-1", "glm-4.6-0", "kimi-k2.6-0"} {
		if !strings.Contains(out, id) {
			t.Errorf("nodes lacks %s:\n%s", id, out)
		}
	}

	// The six core findings of the worked example, in order, with its statuses.
	seed := []struct {
		ind    llmdiagv1.Indicator
		status llmdiagv1.Status
	}{
		{llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Status_STATUS_WARN},
		{llmdiagv1.Indicator_INDICATOR_E2E_P99, llmdiagv1.Status_STATUS_WARN},
	}
	fs := resp.GetDiagnosis().GetFindings()
	if len(fs) < len(seed) {
		t.Fatalf("%d findings:\n%s", len(fs), diag)
	}
	for i, w := range seed {
		if fs[i].GetIndicator() != w.ind {
			t.Errorf("finding %d is %v, want %v", i, fs[i].GetIndicator(), w.ind)
		}
		// Queue spikes come and go in the simulation: a spike caught at the
		// moment of the read may make the queue findings WARN.
		if fs[i].GetStatus() != w.status && w.ind != llmdiagv1.Indicator_INDICATOR_QUEUE && w.ind != llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO {
			t.Errorf("%v is %v, want %v", w.ind, fs[i].GetStatus(), w.status)
		}
	}
	_ = serveLog
	for _, lang := range []struct{ flag, want string }{{"en", "Not memory, not queueing"}, {"zh", "不是显存不够"}} {
		out, _, err = clitest.Run(t, vars, "diagnose", "deepseek-v4-0", "--lang", lang.flag, "--format", "markdown")
		if err != nil || !strings.Contains(out, lang.want) || !strings.Contains(out, "| ") {
			t.Fatalf("diagnose --lang %s: %v\n%s", lang.flag, err, out)
		}
	}

	// Under load a scrape can miss its deadline and leave one node without
	// data for a refresh: wait for a comparison with all three models ranked.
	clitest.WaitFor(t, "compare --by model to rank three models", 30*time.Second, func() bool {
		o, _, err := clitest.Run(t, vars, "compare", "--metric", "ttft", "--by", "model")
		out = o
		if err != nil {
			return false
		}
		for _, m := range []string{"deepseek-v4", "glm-4.6", "kimi-k2.6", "#1", "#2", "#3"} {
			if !strings.Contains(o, m) {
				return false
			}
		}
		return true
	}, &out)
	out, _, err = clitest.Run(t, vars, "metrics", "glm-4.6-0")
	if err != nil || !strings.Contains(out, "ttft") || !strings.Contains(out, "kv pressure") {
		t.Fatalf("metrics: %v\n%s", err, out)
	}

	// watch prints the current state, the marker, then runs until stopped.
	var wout, werr testkit.SyncBuffer
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer wcancel()
	if err := cli.Run(wctx, []string{"watch", "--model", "glm-4.6", "--heartbeat", "5s"}, clitest.Env(vars, &wout, &werr)); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if w := wout.String(); !strings.Contains(w, "glm-4.6-0") || !strings.Contains(w, "current state above") || strings.Contains(w, "deepseek") {
		t.Fatalf("watch --model glm-4.6 printed:\n%s\n%s", w, werr.String())
	}
}
