package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/dashboard"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

func TestDashboardCommand(t *testing.T) {
	out, _, err := clitest.Run(t, nil, "dashboard")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := dashboard.Write(&b, dashboard.Config{}); err != nil {
		t.Fatal(err)
	}
	if out != b.String() {
		t.Error("llmdiag dashboard does not write the default dashboard")
	}
	// Flags and their environment variables.
	path := filepath.Join(t.TempDir(), "d.json")
	th := clitest.WriteFile(t, "t.yaml", "kv_warn: 0.77\n")
	vars := map[string]string{"LLMDIAG_NODE_LABEL": "pod", "LLMDIAG_THRESHOLDS": th}
	if _, stderr, err := clitest.Run(t, vars, "dashboard", "--out", path, "--window", "2m", "--datasource", "prom-main"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`llmdiag:preemptions:rate2m{pod=~\"$node\"`, `"value": "prom-main"`, `"value": 0.77,`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
	if n := len(clitest.DashboardQueries(t, path)); n < 30 {
		t.Errorf("%d queries", n)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dashboard", "--node-label", "a-b"}, `node label "a-b"`},
		{[]string{"dashboard", "--window", "0s"}, "--window"},
		{[]string{"dashboard", "--uid", "a b"}, "uid"},
		{[]string{"dashboard", "extra"}, "extra"},
		{[]string{"dashboard", "--out", filepath.Join(t.TempDir(), "none", "d.json")}, "--out"},
	} {
		_, stderr, err := clitest.Run(t, nil, tc.args...)
		if err == nil || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
		if err != nil && !strings.Contains(tc.want, "--out") && cli.ExitCode(err) != 2 {
			t.Errorf("%v: exit code %d, want 2 (usage)", tc.args, cli.ExitCode(err))
		}
	}
}
