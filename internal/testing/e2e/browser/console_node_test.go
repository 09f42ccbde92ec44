package browser_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/browsertest"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// deepseek is the seed's section-8 node: decode-bound.
const deepseek = "deepseek-v4-0"

// diagnosed waits until the service gives node the cause.
func diagnosed(t *testing.T, c llmdiagv1connect.DiagnosisServiceClient, node string, cause llmdiagv1.Cause) {
	t.Helper()
	var last string
	clitest.WaitFor(t, node+"'s "+cause.String()+" verdict from the service", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node}))
		if err != nil {
			last = err.Error()
			return false
		}
		last = res.Msg.GetDiagnosis().GetRootCause().String()
		return res.Msg.GetDiagnosis().GetRootCause() == cause
	}, &last)
}

// observed waits until node's window holds TTFT, E2E and inter-token
// observations, which the node page charts: a window of the service's
// first seconds may hold no finished request yet (the DeepSeek node
// finishes few a second), and it only gains observations until it spans
// the whole window.
func observed(t *testing.T, c llmdiagv1connect.DiagnosisServiceClient, node string) {
	t.Helper()
	var last string
	clitest.WaitFor(t, node+"'s window with latency observations", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node}))
		if err != nil {
			last = err.Error()
			return false
		}
		m := res.Msg.GetMetrics()
		last = fmt.Sprintf("ttft %v, e2e %v, inter-token %v observations", m.GetTtft().GetCount(), m.GetE2E().GetCount(), m.GetInterToken().GetCount())
		return m.GetTtft().GetCount() > 0 && m.GetE2E().GetCount() > 0 && m.GetInterToken().GetCount() > 0
	}, &last)
}

// until polls a JavaScript predicate in the page until it holds, within d.
func until(t *testing.T, ctx context.Context, d time.Duration, what, predicate string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(d))); err != nil {
		t.Fatalf("waiting %v for %s (%s): %v", d, what, predicate, err)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// within 10 s.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// points reads data-points of the chart named name.
func points(t *testing.T, ctx context.Context, name string) int {
	t.Helper()
	return eval[int](t, ctx, fmt.Sprintf(`(() => { const s = document.querySelector('svg[data-chart=%q]'); return s ? Number(s.dataset.points) : -1; })()`, name))
}

// noProblemsBut fails t when the page raised errors (exceptions, CSP
// violations, failed loads) other than those containing one of expected.
func noProblemsBut(t *testing.T, ctx context.Context, expected ...string) {
	t.Helper()
	var p []string
	for _, msg := range browsertest.Problems(ctx) {
		if !slices.ContainsFunc(expected, func(e string) bool { return strings.Contains(msg, e) }) {
			p = append(p, msg)
		}
	}
	if len(p) > 0 {
		t.Errorf("the page raised %d errors:\n%s", len(p), strings.Join(p, "\n"))
	}
}

// TestConsoleNodeAndCompare drives the node and compare pages against the
// simulated seed fleet: the DeepSeek node's decode-bound verdict, the
// section-8 table, non-empty charts, the Chinese report; an unknown node;
// the comparison by model.
func TestConsoleNodeAndCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the node and compare pages in Chromium, about 30 s")
	}
	fl, fleetPath := consoleSim(t)
	nodes := len(fleetIDs(t, fl))
	// A second service with a 30 s window: the history keeps window figures
	// (E2E P99) only once the window is covered, which takes 5 min for the
	// default window. It covers its window while the other subtests run.
	shortBase, _ := consoleServe(t, fleetPath, nodes, "", "--window", "30s")
	base, c := consoleServe(t, fleetPath, nodes, "")
	diagnosed(t, c, deepseek, llmdiagv1.Cause_CAUSE_DECODE_BOUND)
	observed(t, c, deepseek)

	t.Run("deepseek", func(t *testing.T) {
		ctx := browsertest.New(t)
		step(t, ctx, 30*time.Second, "the decode-bound verdict on the node page",
			chromedp.Navigate(base+"/#/node/"+deepseek),
			chromedp.WaitVisible(chromedp.CSS(`#root-cause[data-cause="CAUSE_DECODE_BOUND"]`)),
			chromedp.WaitVisible(chromedp.CSS(`svg[data-chart="histogram-e2e"]`)))
		// The seed's section-8 rows.
		for _, ind := range []string{"KV_PRESSURE", "QUEUE", "QUEUE_RUNNING_RATIO", "PROMPT_TOKEN_RATE",
			"GENERATION_TOKEN_RATE", "E2E_P99"} {
			sel := fmt.Sprintf(`#findings tr[data-indicator="INDICATOR_%s"]`, ind)
			if n := eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n != 1 {
				t.Errorf("%s: %d rows, want 1", sel, n)
			}
		}
		if got := eval[string](t, ctx, `document.querySelector('#root-cause h2').textContent`); !strings.Contains(got, "Root cause") || !strings.Contains(got, "Decode-bound") {
			t.Errorf("root cause heading %q, want the English one naming decode-bound", got)
		}
		for _, m := range []string{"ttft", "e2e", "itl"} {
			if n := points(t, ctx, "percentiles-"+m); n != 3 {
				t.Errorf("percentiles-%s draws %d points, want P50, P95 and P99", m, n)
			}
			if n := points(t, ctx, "histogram-"+m); n < 1 {
				t.Errorf("histogram-%s draws %d bars, want some", m, n)
			}
		}
		// Bucket bounds are drawn as ranges: one band per drawn point.
		if n := eval[int](t, ctx, `document.querySelectorAll('svg[data-chart="percentiles-e2e"] rect.chart-range').length`); n != 3 {
			t.Errorf("percentiles-e2e has %d bucket bands, want 3", n)
		}
		var allowed []string
		history := eval[bool](t, ctx, `!document.querySelector('#history-na')`)
		if history {
			step(t, ctx, 10*time.Second, "the sparklines", chromedp.WaitVisible(chromedp.CSS(`svg[data-chart="spark-e2e-p99"]`)))
			// E2E P99 is kept once the window is covered: the "history"
			// subtest checks it.
			for _, s := range []string{"spark-queue", "spark-running", "spark-kv"} {
				if n := points(t, ctx, s); n < 1 {
					t.Errorf("%s draws %d points, want some", s, n)
				}
			}
		} else {
			t.Log("this service has no GetNodeHistory: the page says history is not available")
			allowed = append(allowed, "404 (Not Found) "+base+"/llmdiag.v1.DiagnosisService/GetNodeHistory")
		}
		// What the load transferred: every file and every answer.
		weight := eval[map[string]float64](t, ctx, `(() => {
			const nav = performance.getEntriesByType('navigation')[0];
			const res = performance.getEntriesByType('resource');
			const sum = (xs) => xs.reduce((s, e) => s + e.transferSize, 0);
			const api = res.filter(e => e.name.includes('/llmdiag.v1.DiagnosisService/'));
			return {files: nav.transferSize + sum(res.filter(e => !api.includes(e))), api: sum(api), n: res.length + 1};
		})()`)
		t.Logf("the node page's load transferred %.1f KB of files and %.1f KB of answers in %.0f requests",
			weight["files"]/1024, weight["api"]/1024, weight["n"])
		if total := weight["files"] + weight["api"]; total >= 300<<10 || weight["files"] == 0 {
			t.Errorf("the node page's load transferred %.0f bytes, want some and under 300 KB", total)
		}
		// The commands name this service and no token.
		cmds := eval[string](t, ctx, `document.querySelector('.node-cmds').textContent`)
		host := strings.TrimPrefix(base, "http://")
		for _, want := range []string{"grpcurl -plaintext", "llmdiag.v1.DiagnosisService/DiagnoseNode", host, base + "/llmdiag.v1.DiagnosisService/GetNodeMetrics", `"node":"` + deepseek + `"`} {
			if !strings.Contains(cmds, want) {
				t.Errorf("the commands lack %q:\n%s", want, cmds)
			}
		}

		// Chinese: the report comes back localized, the table re-rendered.
		step(t, ctx, 20*time.Second, "the Chinese report",
			chromedp.Click(chromedp.CSS(`#lang-toggle`)),
			chromedp.WaitVisible(chromedp.CSS(`#lang-toggle[aria-pressed="true"]`)))
		until(t, ctx, 15*time.Second, "the Chinese root cause", `document.querySelector('#root-cause h2').textContent.includes('根本原因')`)
		kv := eval[string](t, ctx, `document.querySelector('#findings tr[data-indicator="INDICATOR_KV_PRESSURE"] th').textContent`)
		if !strings.Contains(kv, "压力") {
			t.Errorf("KV pressure row in Chinese reads %q, want the Chinese name (…压力)", kv)
		}
		if got := eval[string](t, ctx, `location.hash`); !strings.Contains(got, "lang=zh") {
			t.Errorf("location.hash %q does not keep the language", got)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('#root-cause[data-cause="CAUSE_DECODE_BOUND"]').length`); n != 1 {
			t.Error("the Chinese report lost the decode-bound root cause")
		}
		step(t, ctx, 20*time.Second, "back to English",
			chromedp.Click(chromedp.CSS(`#lang-toggle`)),
			chromedp.WaitVisible(chromedp.CSS(`#lang-toggle[aria-pressed="false"]`)))
		until(t, ctx, 15*time.Second, "the English root cause again", `document.querySelector('#root-cause h2').textContent.includes('Root cause')`)
		// A phone's width: nothing wider than the screen.
		step(t, ctx, 10*time.Second, "a 360 px screen", chromedp.EmulateViewport(360, 740))
		if wide := eval[int](t, ctx, `document.documentElement.scrollWidth`); wide > 360 {
			t.Errorf("at 360 px the node page is %d px wide, want no horizontal scrolling", wide)
		}
		noProblemsBut(t, ctx, allowed...)
	})

	t.Run("charts", func(t *testing.T) {
		ctx := browsertest.New(t)
		step(t, ctx, 20*time.Second, "the console", chromedp.Navigate(base+"/#/compare"), chromedp.WaitVisible(chromedp.CSS(`svg[data-chart="compare"]`)))
		// The builders on the API's JSON shapes: cumulative counts
		// differenced (a dip reads 0 and the next bucket counts from the
		// highest before it), NaN as "no observations", an upper
		// bound of +Inf drawn open, absent fields read as 0.
		got := eval[string](t, ctx, `import('/console/charts.js').then(c => JSON.stringify({
			buckets: c.bucketCounts({bucketBounds: [0.1, 1, 10, "Infinity"], bucketCounts: [2, 5, 4, 9]}).map(b => b.n),
			hist: c.histogram('h', 'H', {bucketBounds: [0.1, 1, 10, 100, "Infinity"], bucketCounts: [0, 3, 3, 7, 7]}).dataset.points,
			empty: c.histogram('h', 'H', {bucketBounds: [1, "Infinity"], bucketCounts: [0, 0]}).dataset.points,
			pct: c.percentileChart('p', 'P', {percentiles: [
				{quantile: 0.5, value: 0.3, upperBound: 0.5},
				{quantile: 0.95, value: "NaN", lowerBound: 1, upperBound: 2},
				{quantile: 0.99, value: 40, lowerBound: 40, upperBound: "Infinity"}]}).dataset.points,
			open: c.percentileChart('p', 'P', {percentiles: [{quantile: 0.5, value: 0.3, upperBound: 0.5},
				{quantile: 0.99, value: 40, lowerBound: 40, upperBound: "Infinity"}]}).querySelectorAll('.chart-open').length,
			desc: c.percentileChart('p', 'P', {percentiles: [{quantile: 0.99, value: 2.5, lowerBound: 1, upperBound: 5}]}).querySelector('desc').textContent,
			spark: c.sparkline('s', 'S', [{t: 1, v: 1}, {t: 2, v: NaN}, {t: 3, v: 2}]).dataset.points,
			bars: c.rangeBars('b', 'B', [{label: 'a', value: 1, lo: 0.5, hi: 2, rank: 1}, {label: 'b', value: NaN, rank: 0, note: 'no data'}]).dataset.points,
			log: c.rangeBars('b', 'B', [{label: 'a', value: 0.05, lo: 0, hi: 0.1, rank: 1}, {label: 'b', value: 5, lo: 2.5, hi: 5, rank: 2}]).dataset.scale,
		}))`)
		want := `{"buckets":[2,3,0,4],"hist":"3","empty":"0","pct":"2","open":2,"desc":"P99 2.5 s (bucket 1 s–5 s)","spark":"2","bars":"1","log":"log"}`
		if got != want {
			t.Errorf("charts.js on fixtures:\n got %s\nwant %s", got, want)
		}
	})

	t.Run("unknown node", func(t *testing.T) {
		ctx := browsertest.New(t)
		step(t, ctx, 20*time.Second, "the no-such-node message",
			chromedp.Navigate(base+"/#/node/no-such-node-here"),
			chromedp.WaitVisible(chromedp.CSS(`#no-such-node`)))
		if got := eval[string](t, ctx, `document.querySelector('#no-such-node').textContent`); !strings.Contains(got, "No such node") || !strings.Contains(got, "no-such-node-here") {
			t.Errorf("message %q, want it to say no such node and name it", got)
		}
	})

	t.Run("compare by model", func(t *testing.T) {
		ctx := browsertest.New(t)
		step(t, ctx, 20*time.Second, "the comparison by model",
			chromedp.Navigate(base+"/#/compare?by=model&metric=ttft&q=0.99"),
			chromedp.WaitVisible(chromedp.CSS(`svg[data-chart="compare"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#compare-table`)))
		// The seed serves three models.
		if n := points(t, ctx, "compare"); n != 3 {
			t.Errorf("compare draws %d bars, want 3 (one per model)", n)
		}
		subjects := eval[[]string](t, ctx, `[...document.querySelectorAll('#compare-table tbody tr')].map(r => r.dataset.subject)`)
		if len(subjects) != 3 {
			t.Fatalf("table rows %v, want 3 models", subjects)
		}
		// Ranked: the first row has rank 1 at P99, and deepseek (its
		// 12k-token prompts) is the slowest TTFT.
		ranks := eval[[]string](t, ctx, `[...document.querySelectorAll('#compare-table tbody tr')].map(r => r.querySelector('td:nth-of-type(3)').dataset.rank || '')`)
		if ranks[0] != "1" {
			t.Errorf("P99 ranks by row %v, want the table sorted with #1 first", ranks)
		}
		if subjects[len(subjects)-1] != "deepseek-v4" {
			t.Errorf("rows %v, want deepseek-v4 slowest at TTFT P99", subjects)
		}
		// Changing the metric re-asks and keeps the state in the URL.
		step(t, ctx, 20*time.Second, "the E2E comparison",
			chromedp.SetValue(chromedp.CSS(`#cmp-metric`), "e2e"))
		eval[bool](t, ctx, `document.querySelector('#cmp-metric').dispatchEvent(new Event('change'))`)
		until(t, ctx, 15*time.Second, "the E2E chart", `location.hash.includes('metric=e2e') && document.querySelector('svg[data-chart="compare"]').getAttribute('aria-label').startsWith('E2E')`)
		step(t, ctx, 10*time.Second, "a 360 px screen", chromedp.EmulateViewport(360, 740))
		if wide := eval[int](t, ctx, `document.documentElement.scrollWidth`); wide > 360 {
			t.Errorf("at 360 px the compare page is %d px wide, want no horizontal scrolling", wide)
		}
		noProblems(t, ctx)
	})

	t.Run("history", func(t *testing.T) {
		ctx := browsertest.New(t)
		const node = "glm-4.6-0" // completes several requests per 30 s
		var last int
		testkit.Wait{For: 90 * time.Second, Every: 2 * time.Second, Last: func() string { return fmt.Sprint(last, " points") }}.Until(t,
			"the E2E P99 sparkline over a covered 30 s window", func() bool {
				step(t, ctx, 20*time.Second, "the node page", chromedp.Navigate(shortBase+"/#/node/"+node+"?r="+fmt.Sprint(time.Now().UnixNano())),
					chromedp.WaitVisible(chromedp.CSS(`svg[data-chart="spark-e2e-p99"]`)))
				last = points(t, ctx, "spark-e2e-p99")
				return last > 0
			})
		for _, s := range []string{"spark-queue", "spark-running", "spark-kv", "spark-e2e-p99"} {
			if n := points(t, ctx, s); n < 1 {
				t.Errorf("%s draws %d points, want some", s, n)
			}
		}
		noProblems(t, ctx)
	})

	if os.Getenv(updateScreenshotsEnv) == "1" {
		// The picture in docs/integrations.md, Web console, once the history has a few refreshes and
		// the window is the default 5m.
		t.Run("screenshot", func(t *testing.T) {
			ctx := browsertest.New(t)
			var last int
			testkit.Wait{For: 90 * time.Second, Every: 2 * time.Second, Last: func() string { return fmt.Sprint(last, " history points") }}.Until(t,
				"eight refreshes in the history", func() bool {
					step(t, ctx, 20*time.Second, "the node page", chromedp.Navigate(base+"/#/node/"+deepseek+"?r="+fmt.Sprint(time.Now().UnixNano())),
						chromedp.WaitVisible(chromedp.CSS(`#root-cause[data-cause="CAUSE_DECODE_BOUND"]`)),
						chromedp.WaitVisible(chromedp.CSS(`svg[data-chart="spark-queue"]`)))
					last = points(t, ctx, "spark-queue")
					return last >= 8 && eval[bool](t, ctx, `document.querySelector('.node-charts h2').textContent.includes('5m')`)
				})
			browsertest.Screenshot(t, ctx, clitest.RepoPath(t, "docs", "console-node.png"))
			t.Log("wrote docs/console-node.png")
		})
	}
}
