package cli_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

func TestThresholdsCommand(t *testing.T) {
	out, _, err := clitest.Run(t, nil, "thresholds")
	if err != nil {
		t.Fatal(err)
	}
	th, err := diagnose.LoadThresholds(strings.NewReader(out))
	if err != nil {
		t.Fatalf("printed defaults do not load: %v\n%s", err, out)
	}
	if th != diagnose.DefaultThresholds() {
		t.Errorf("printed defaults load as %+v", th)
	}

	// With a file: its values, the rest at their defaults.
	path := clitest.WriteFile(t, "t.yaml", "kv_crit: 0.97\nqueue_crit_for: 2m\n")
	out, _, err = clitest.Run(t, nil, "thresholds", "--thresholds", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nkv_crit: 0.97\n", "\nqueue_crit_for: \"2m\"\n", "\nkv_warn: 0.9\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestRulesCommand(t *testing.T) {
	path := clitest.WriteFile(t, "t.yaml", "kv_crit: 0.97\nqueue_crit: 80\n")
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
	}{
		{"flag", nil, []string{"rules", "--thresholds", path, "--engine", "vllm", "--engine", "sglang", "--node-label", "pod", "--window", "1m", "--runbook-base-url", "https://llmdiag.example.com/"}},
		{"env", map[string]string{"LLMDIAG_THRESHOLDS": path, "LLMDIAG_ENGINE": "vllm,sglang", "LLMDIAG_NODE_LABEL": "pod", "LLMDIAG_WINDOW": "1m", "LLMDIAG_RUNBOOK_BASE_URL": "https://llmdiag.example.com"}, []string{"rules"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := clitest.Run(t, tc.vars, tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			for _, want := range []string{
				"expr: llmdiag:kv_pressure >= 0.97\n", "expr: llmdiag:queue > 80\n",
				"record: llmdiag:preemptions:rate1m\n", "sum by (pod) (vllm:num_requests_waiting)",
				"engine: sglang\n",
				"runbook_url: https://llmdiag.example.com/runbooks/kv-exhausted\n",
				"runbook_url: https://llmdiag.example.com/runbooks/target-down\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("rules lack %q", want)
				}
			}
			if strings.Contains(out, "engine: tgi") {
				t.Error("rules for an engine not asked for")
			}
			bin, err := exec.LookPath("promtool")
			if err != nil {
				t.Fatal("promtool not found: install it with `apt-get install -y prometheus`")
			}
			rules := clitest.WriteFile(t, "rules.yaml", out)
			if msg, err := exec.Command(bin, "check", "rules", rules).CombinedOutput(); err != nil {
				t.Fatalf("promtool check rules: %v\n%s", err, msg)
			}
		})
	}
}

func TestThresholdsUsageErrors(t *testing.T) {
	bad := clitest.WriteFile(t, "bad.yaml", "kv_warn: 0.9\nkv_critical: 0.99\n")
	outOfRange := clitest.WriteFile(t, "range.yaml", "kv_crit: 1.5\n")
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"serve unknown key", nil, []string{"serve", "--thresholds", bad, "--target", "a=http://127.0.0.1:1/metrics"}, `line 2: unknown key "kv_critical"`},
		{"serve via env", map[string]string{"LLMDIAG_THRESHOLDS": outOfRange}, []string{"serve", "--target", "a=http://127.0.0.1:1/metrics"}, "kv_crit: must be in (0, 1]"},
		{"serve missing file", nil, []string{"serve", "--thresholds", filepath.Join(t.TempDir(), "none.yaml"), "--target", "a=http://127.0.0.1:1/metrics"}, "none.yaml"},
		{"rules bad file", nil, []string{"rules", "--thresholds", bad}, "kv_critical"},
		{"thresholds bad file", nil, []string{"thresholds", "--thresholds", outOfRange}, "kv_crit"},
		{"rules unknown engine", nil, []string{"rules", "--engine", "foo"}, `unknown engine "foo"`},
		{"rules bad node label", nil, []string{"rules", "--node-label", "not-a-label"}, "not-a-label"},
		{"rules bad window", nil, []string{"rules", "--window", "0s"}, "--window"},
		{"rules bad runbook base URL", nil, []string{"rules", "--runbook-base-url", "llmdiag.example.com"}, "runbook base URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := clitest.Run(t, tc.vars, tc.args...)
			if err == nil {
				t.Fatal("accepted")
			}
			if code := cli.ExitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (usage): %v", code, err)
			}
			if !strings.Contains(err.Error()+stderr, tc.want) {
				t.Errorf("error does not say %q: %v\n%s", tc.want, err, stderr)
			}
		})
	}
}
