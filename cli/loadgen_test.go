package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/loadgen"
)

// TestSimServesLoadgen: `llmdiag sim --load external` on loopback, and
// `llmdiag loadgen` against one node for two seconds: percentiles are
// reported, and the node's /metrics count exactly the requests served.
func TestSimServesLoadgen(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fleet.yaml")
	clitest.Background(t, nil, "sim", "--scenario", "seed", "--load", "external", "--warmup", "0",
		"--fleet-out", out, "--log-level", "warn")
	var ff *fleet.File
	clitest.WaitFor(t, "the fleet file", 30*time.Second, func() bool {
		f, err := fleet.Load(out)
		ff = f
		return err == nil
	})
	var metricsURL string
	for _, n := range ff.Nodes {
		if n.ID == "kimi-k2.6-0" {
			metricsURL = n.URL
		}
	}
	api := strings.TrimSuffix(metricsURL, "/metrics") + "/v1/chat/completions"
	stdout, stderr, err := clitest.Run(t, nil, "loadgen", "--url", api, "--rate", "5", "--duration", "2s",
		"--prompt-tokens", "0.7:200-400,0.3:1000~0.3", "--output-tokens", "4-12", "--stream", "--json")
	if err != nil {
		t.Fatalf("loadgen: %v\n%s", err, stderr)
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("loadgen --json: %v\n%s", err, stdout)
	}
	if res.Sent == 0 || res.Succeeded != res.Sent || res.TTFT == nil || res.TTFT.N != res.Sent ||
		!(res.TTFT.P50 > 0) || !(res.E2E.P50 >= res.TTFT.P50) || !(res.E2E.P99 >= res.E2E.P50) {
		t.Fatalf("loadgen result %s", stdout)
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ttft, e2e uint64
	for _, m := range mfs["vllm:time_to_first_token_seconds"].GetMetric() {
		ttft += m.GetHistogram().GetSampleCount()
	}
	for _, m := range mfs["vllm:e2e_request_latency_seconds"].GetMetric() {
		e2e += m.GetHistogram().GetSampleCount()
	}
	if ttft != uint64(res.Sent) || e2e != uint64(res.Sent) {
		t.Errorf("node's TTFT count %d, E2E count %d; loadgen served %d", ttft, e2e, res.Sent)
	}

	// The table form, and a refused flag.
	stdout, _, err = clitest.Run(t, nil, "loadgen", "--url", api, "--rate", "20", "--duration", "300ms", "--output-tokens", "2")
	if err != nil || !strings.Contains(stdout, "E2E") || !strings.Contains(stdout, "p99") {
		t.Errorf("loadgen table: %v\n%s", err, stdout)
	}
	if _, _, err := clitest.Run(t, nil, "loadgen", "--url", api, "--rate", "5000"); err == nil {
		t.Error("--rate 5000 accepted")
	}
}
