package diagnose_test

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/diagnose"
)

func TestDefaultThresholdsValid(t *testing.T) {
	if err := diagnose.DefaultThresholds().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestThresholdsYAML(t *testing.T) {
	th := diagnose.DefaultThresholds()
	doc := "kv_warn: 0.85\nttft_p99_warn: 5s\nqueue_crit_for: 2m\nmin_peers: 3\n"
	if err := yaml.Unmarshal([]byte(doc), &th); err != nil {
		t.Fatal(err)
	}
	if th.KVWarn != 0.85 || th.TTFTP99Warn != 5*time.Second || th.QueueCritFor != 2*time.Minute || th.MinPeers != 3 {
		t.Errorf("overrides not applied: %+v", th)
	}
	if th.KVCrit != 0.95 || th.QueueSaturated != 5 {
		t.Errorf("keys left out lost their defaults: %+v", th)
	}
	if err := th.Validate(); err != nil {
		t.Error(err)
	}
}

func TestThresholdsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*diagnose.Thresholds)
		keys   []string
	}{
		{"zero value", func(th *diagnose.Thresholds) { *th = diagnose.Thresholds{} }, []string{"stale_after", "kv_crit", "ttft_p99_warn", "outlier_ratio", "min_peers"}},
		{"kv order", func(th *diagnose.Thresholds) { th.KVWarn, th.KVCrit = 0.96, 0.95 }, []string{"kv_warn"}},
		{"kv above 1", func(th *diagnose.Thresholds) { th.KVCrit = 1.5 }, []string{"kv_crit"}},
		{"queue order", func(th *diagnose.Thresholds) { th.QueueCrit = 3 }, []string{"queue_crit"}},
		{"latency order", func(th *diagnose.Thresholds) { th.E2EP99Crit = time.Second }, []string{"e2e_p99_warn"}},
		{"fraction", func(th *diagnose.Thresholds) { th.SustainedFraction = 1.5 }, []string{"sustained_fraction"}},
		{"negative", func(th *diagnose.Thresholds) { th.MaxRunning = -1 }, []string{"max_running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := diagnose.DefaultThresholds()
			tc.modify(&th)
			err := th.Validate()
			if err == nil {
				t.Fatal("Validate accepted invalid thresholds")
			}
			for _, k := range tc.keys {
				if !strings.Contains(err.Error(), k+":") {
					t.Errorf("error does not name %s: %v", k, err)
				}
			}
		})
	}
}
