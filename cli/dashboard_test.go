package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/dashboard"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// loadDashboard reads a dashboard file into the SDK's type and returns
// its queries.
func loadDashboard(t *testing.T, path string) []dashboard.Query {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins() // the SDK's decoder of panel and query types
	var d sdk.Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s does not load into the SDK's dashboard type: %v", path, err)
	}
	qs, err := dashboard.Queries(d)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// TestDashboardOnPrometheus is the dashboard's acceptance test: the seed
// fleet and llmdiag serve (with a real Redis, for the lease panels)
// scraped by a real Prometheus that evaluates `llmdiag rules`; every
// query of the dashboard `llmdiag dashboard` writes, its variables at
// "All", returns data. No panel ships empty.
func TestDashboardOnPrometheus(t *testing.T) {
	start := time.Now()
	dir := t.TempDir()
	simFleet := filepath.Join(dir, "sim.yaml")
	background(t, nil, "sim", "--scenario", "seed", "--fleet-out", simFleet, "--log-level", "warn")
	waitFor(t, "the fleet file", 30*time.Second, func() bool { _, err := os.Stat(simFleet); return err == nil })
	f, err := fleet.Load(simFleet)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, n := range f.Nodes {
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u.Host)
	}

	rs := redistest.Start(t)
	addr := testkit.FreeAddr(t)
	vars := map[string]string{"LLMDIAG_ADDR": "http://" + addr}
	background(t, vars, "serve", "--listen", addr, "--fleet", simFleet, "--redis", rs.URL(), "--interval", "1s", "--log-level", "warn")

	// The rules and the dashboard, with the same short window.
	const window = "30s"
	rules, _, err := run(t, nil, "rules", "--window", window)
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := writeFile(t, "rules.yaml", rules)
	dashPath := filepath.Join(dir, "dashboard.json")
	if _, stderr, err := run(t, nil, "dashboard", "--window", window, "--out", dashPath); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	queries := loadDashboard(t, dashPath)
	var status dashboard.Query
	for _, q := range queries {
		if q.Panel == "Status by node and model" {
			status = q
		}
	}
	if status.Expr == "" {
		t.Fatal("no status panel")
	}

	prom := promtest.Start(t, promtest.Options{
		Targets: append(targets, addr), ScrapeInterval: time.Second, RuleFiles: []string{rulesPath},
	})
	// Some RPCs for llmdiag's own panels (this also waits for serve).
	waitFor(t, "llmdiag answers nodes", 60*time.Second, func() bool {
		_, _, err := run(t, vars, "nodes")
		return err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The rules have evaluated over a window with two scrapes in it.
	if err := prom.WaitForSamples(ctx, "llmdiag:generation_tokens:rate"+window, 1); err != nil {
		t.Fatal(err)
	}

	// Grafana's $__rate_interval is at least four scrape intervals.
	const interval = 10 * time.Second
	var empty []string
	last := ""
	waitFor(t, "every dashboard query returns data", 90*time.Second, func() bool {
		empty = empty[:0]
		for _, q := range queries {
			expr := dashboard.ForPrometheus(q.Expr, interval)
			n, err := 0, error(nil)
			if q.Label != "" {
				now := time.Now()
				vals, _, _, e := prom.API().LabelValues(ctx, q.Label, []string{expr}, now.Add(-time.Minute), now)
				n, err = len(vals), e
			} else {
				v, e := prom.QueryVector(ctx, expr, time.Now())
				n, err = len(v), e
			}
			if err != nil || n == 0 {
				empty = append(empty, fmt.Sprintf("%s %s: %d samples, error %v: %s", q.Panel, q.RefID, n, err, expr))
			}
		}
		// The status panel shows the seed fleet's troubles, not only OK.
		if len(empty) == 0 {
			v, err := prom.QueryVector(ctx, "max("+dashboard.ForPrometheus(status.Expr, interval)+") >= "+strconv.Itoa(dashboard.StatusWarn), time.Now())
			if err != nil || len(v) == 0 {
				empty = append(empty, fmt.Sprintf("status: no node at WARN or worse (error %v)", err))
			}
		}
		last = strings.Join(empty, "\n")
		return len(empty) == 0
	}, &last)
	t.Logf("%d queries of the dashboard return data, %v after the start", len(queries), time.Since(start).Round(time.Second))
}

func TestDashboardCommand(t *testing.T) {
	out, _, err := run(t, nil, "dashboard")
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
	th := writeFile(t, "t.yaml", "kv_warn: 0.77\n")
	vars := map[string]string{"LLMDIAG_NODE_LABEL": "pod", "LLMDIAG_THRESHOLDS": th}
	if _, stderr, err := run(t, vars, "dashboard", "--out", path, "--window", "2m", "--datasource", "prom-main"); err != nil {
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
	if n := len(loadDashboard(t, path)); n < 30 {
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
		_, stderr, err := run(t, nil, tc.args...)
		if err == nil || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
		if err != nil && !strings.Contains(tc.want, "--out") && cli.ExitCode(err) != 2 {
			t.Errorf("%v: exit code %d, want 2 (usage)", tc.args, cli.ExitCode(err))
		}
	}
}
