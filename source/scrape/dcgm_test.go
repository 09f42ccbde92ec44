package scrape_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/source/scrape"
)

// TestDCGM: a node's DCGM exporter is scraped with its engine; its GPU
// figures join the node's metrics, and a failing exporter leaves them
// absent with a warning while the engine's figures stay whole.
func TestDCGM(t *testing.T) {
	vllm := serveFile(t, "../../engine/testdata/vllm-dp2.prom")
	dcgm := serveFile(t, "../../engine/testdata/dcgm-h100-decode.prom")
	throttled := serveFile(t, "../../engine/testdata/dcgm-a100-throttled-xid.prom")
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	pods := serveFile(t, "../../engine/testdata/dcgm-h100-pods.prom")
	engineOnly := serveBody(t, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n")
	for _, tc := range []struct {
		name, dcgm string
		labels     map[string]string // the node's
		wantGPUs   uint32
		wantWarn   string // in the metrics' warnings; "" for none
	}{
		{"no exporter", "", nil, 0, ""},
		{"h100", dcgm.URL + "/metrics", nil, 8, ""},
		{"throttled", throttled.URL + "/metrics", nil, 4, ""},
		{"exporter down", deadURL(t), nil, 0, "no GPU figures"},
		{"404", notFound.URL + "/metrics", nil, 0, "HTTP 404"},
		{"not dcgm", engineOnly.URL + "/metrics", nil, 0, "no DCGM_FI_* family"},
		// One exporter, two engines' pods: each node its own pod's GPUs.
		{"shared exporter, no pod label", pods.URL + "/metrics", nil, 5, ""},
		{"shared exporter, pod a", pods.URL + "/metrics", map[string]string{"pod": "llama-a-0"}, 2, ""},
		{"shared exporter, pod b", pods.URL + "/metrics", map[string]string{"pod": "llama-b-0", "namespace": "inference"}, 1, ""},
		{"shared exporter, no such pod", pods.URL + "/metrics", map[string]string{"pod": "gone-0"}, 0, "no DCGM series of pod gone-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1768264439, 0)
			s := scrape.New([]fleet.Node{{ID: "n", URL: vllm.URL + "/metrics", DCGM: tc.dcgm, Labels: tc.labels}}, nil,
				slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, scrape.Options{Timeout: 2 * time.Second})
			obs, err := s.Refresh(context.Background(), "5m")
			if err != nil {
				t.Fatal(err)
			}
			m := obs[0].Metrics
			if !m.GetUp() || m.GetQueue() == 0 && m.Queue == nil || len(m.GetErrors()) > 0 {
				t.Errorf("engine figures touched: up %v queue %v errors %q", m.GetUp(), m.Queue, m.GetErrors())
			}
			if got := m.GetGpu().GetGpus(); got != tc.wantGPUs {
				t.Errorf("GPUs = %d, want %d", got, tc.wantGPUs)
			}
			if tc.wantGPUs == 0 && m.Gpu != nil {
				t.Errorf("GPU section %v, want absent", m.Gpu)
			}
			warned := strings.Join(m.GetWarnings(), "\n")
			if tc.wantWarn == "" && warned != "" || !strings.Contains(warned, tc.wantWarn) {
				t.Errorf("warnings %q, want %q", warned, tc.wantWarn)
			}
			if tc.name == "throttled" && (len(m.GetGpu().GetXidErrors()) != 1 || len(m.GetGpu().GetThrottledGpus()) != 2) {
				t.Errorf("throttled GPU section %v", m.GetGpu())
			}
		})
	}
}
