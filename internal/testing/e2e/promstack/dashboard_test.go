package promstack_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/dashboard"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestDashboardOnPrometheus is the dashboard's acceptance test: the seed
// fleet and llmdiag serve (with a real Redis, for the lease panels)
// scraped by a real Prometheus that evaluates `llmdiag rules`; every
// query of the dashboard `llmdiag dashboard` writes, its variables at
// "All", returns data. No panel ships empty.
func TestDashboardOnPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the dashboard on a real Prometheus and Redis")
	}
	start := time.Now()
	dir := t.TempDir()
	simFleet := filepath.Join(dir, "sim.yaml")
	f := clitest.Sim(t, "seed", simFleet)
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
	clitest.Background(t, vars, "serve", "--listen", addr, "--fleet", simFleet, "--redis", rs.URL(), "--interval", "1s", "--log-level", "warn")

	// The rules and the dashboard, with the same short window.
	const window = "30s"
	rules, _, err := clitest.Run(t, nil, "rules", "--window", window)
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := clitest.WriteFile(t, "rules.yaml", rules)
	dashPath := filepath.Join(dir, "dashboard.json")
	if _, stderr, err := clitest.Run(t, nil, "dashboard", "--window", window, "--out", dashPath); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	queries := clitest.DashboardQueries(t, dashPath)
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
	clitest.WaitFor(t, "llmdiag answers nodes", 60*time.Second, func() bool {
		_, _, err := clitest.Run(t, vars, "nodes")
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
	clitest.WaitFor(t, "every dashboard query returns data", 90*time.Second, func() bool {
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
