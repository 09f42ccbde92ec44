package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/browsertest"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sim"
)

// updateScreenshotsEnv set to 1 makes the console tests write docs/integrations.md's
// screenshots into docs/.
const updateScreenshotsEnv = "LLMDIAG_UPDATE_SCREENSHOTS"

// consoleSim runs the seed fleet in process, as `llmdiag sim --scenario
// seed` does (same seed, warm-up, real time), so the test can change a
// node's arrival rate (sim.Fleet.SetRate), which the command has no control
// for. It returns the fleet and its fleet file.
func consoleSim(t *testing.T) (*sim.Fleet, string) {
	t.Helper()
	return simtest.Seed(t)
}

// consoleServe starts serve on the fleet as scripts/run.sh does (default
// interval, no rate limit) plus extra flags, and waits until every node
// has a verdict. It returns the base URL and a client.
func consoleServe(t *testing.T, fleetPath string, nodes int, token string, extra ...string) (string, llmdiagv1connect.DiagnosisServiceClient) {
	t.Helper()
	addr := testkit.FreeAddr(t)
	args := append([]string{"serve", "--listen", addr, "--fleet", fleetPath, "--rate-limit", "0", "--log-level", "warn"}, extra...)
	clitest.Background(t, nil, args...)
	base := "http://" + addr
	hc := http.DefaultClient
	if token != "" {
		hc = &http.Client{Transport: testkit.Bearer{Token: token, Next: http.DefaultTransport}}
	}
	c := llmdiagv1connect.NewDiagnosisServiceClient(hc, base)
	var last string
	clitest.WaitFor(t, "serve to list every node with a verdict", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
		if err != nil {
			last = err.Error()
			return false
		}
		known := 0
		for _, n := range res.Msg.GetNodes() {
			if n.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN && n.GetStatus() != llmdiagv1.Status_STATUS_UNSPECIFIED {
				known++
			}
		}
		last = fmt.Sprintf("%d nodes, %d with a verdict", len(res.Msg.GetNodes()), known)
		return len(res.Msg.GetNodes()) == nodes && known == nodes
	}, &last)
	return base, c
}

// step runs chromedp actions within d.
func step(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// tileStatuses reads every fleet tile's node and data-status.
func tileStatuses(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := chromedp.Run(sctx, chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll('[data-node]')].map(a => [a.dataset.node, a.dataset.status]))`))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func noProblems(t *testing.T, ctx context.Context) {
	t.Helper()
	if p := browsertest.Problems(ctx); len(p) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(p, "\n"))
	}
}

// TestConsoleFleet: the fleet page lists every seed node with the status
// the service reports, within seconds of opening, and a node pushed into
// overload turns CRIT on the page without a reload. The time from each
// status change (as a StreamHealth client of the test receives it) to the
// tile's new status being painted is measured and logged.
func TestConsoleFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the console in Chromium on the seed fleet, about 30 s")
	}
	fl, fleetPath := consoleSim(t)
	ids := fleetIDs(t, fl)
	base, c := consoleServe(t, fleetPath, len(ids), "")

	// The test's own view of the health stream: when each change arrived.
	type change struct {
		node, status string
		at, observed time.Time
	}
	var mu sync.Mutex
	var changes []change
	sctx, stopStream := context.WithCancel(context.Background())
	streamDone := make(chan struct{})
	t.Cleanup(func() { stopStream(); <-streamDone })
	stream, err := c.StreamHealth(sctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(10 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(streamDone)
		for stream.Receive() {
			m := stream.Msg()
			if m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_CHANGE {
				continue
			}
			h := m.GetHealth()
			mu.Lock()
			changes = append(changes, change{h.GetNode(), h.GetStatus().String(), time.Now(), h.GetObservedAt().AsTime()})
			mu.Unlock()
		}
	}()

	ctx := browsertest.New(t)
	opened := time.Now()
	step(t, ctx, 20*time.Second, "open the console", chromedp.Navigate(base+"/"))
	var tiles map[string]string
	testkit.Wait{For: 10 * time.Second, Every: 100 * time.Millisecond, Last: func() string { return fmt.Sprint(tiles) }}.Until(t,
		"a tile with a status for every seed node", func() bool {
			tiles = tileStatuses(t, ctx)
			for _, id := range ids {
				if !strings.HasPrefix(tiles[id], "STATUS_") {
					return false
				}
			}
			return len(tiles) == len(ids)
		})
	t.Logf("every seed node on the page %v after opening it: %v", time.Since(opened).Round(time.Millisecond), tiles)
	// The tiles show the statuses the service reports (a change may be in
	// flight: wait for them to agree).
	var want map[string]string
	testkit.Wait{For: 15 * time.Second, Every: 200 * time.Millisecond, Last: func() string { return fmt.Sprintf("page %v, service %v", tiles, want) }}.Until(t,
		"the tiles to show the service's statuses", func() bool {
			want = listStatuses(t, c)
			tiles = tileStatuses(t, ctx)
			return fmt.Sprint(want) == fmt.Sprint(tiles)
		})
	step(t, ctx, 10*time.Second, "the page says it is live", chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))

	// Record, in the page, when each tile's status changes: at the next
	// animation frame after the change, the frame that paints the colour.
	step(t, ctx, 10*time.Second, "watch the tiles", chromedp.Evaluate[chromedp.Void](`
		window.__changes = [];
		new MutationObserver(ms => { for (const m of ms) {
			const a = m.target, node = a.dataset.node, status = a.dataset.status;
			if (node && m.oldValue !== status) requestAnimationFrame(() => window.__changes.push({node, status, at: Date.now()}));
		} }).observe(document.getElementById('main'), {attributes: true, attributeFilter: ['data-status'], attributeOldValue: true, subtree: true});
		window.__loads = performance.getEntriesByType('navigation').length;`))

	// Overload glm-4.6-0: far more arrivals than its batch slots serve.
	const hot = "glm-4.6-0"
	if tiles[hot] == "STATUS_CRIT" {
		t.Fatalf("%s is CRIT before the overload: %v", hot, tiles)
	}
	if err := fl.SetRate(hot, 40); err != nil {
		t.Fatal(err)
	}
	pushed := time.Now()
	step(t, ctx, 90*time.Second, hot+" to turn CRIT on the page", chromedp.WaitVisible(chromedp.CSS(`[data-node="`+hot+`"][data-status="STATUS_CRIT"]`)))
	t.Logf("%s CRIT on the page %v after its rate was raised", hot, time.Since(pushed).Round(time.Millisecond))
	if os.Getenv(updateScreenshotsEnv) == "1" { // the picture in docs/integrations.md: the seed fleet with one node overloaded
		step(t, ctx, 10*time.Second, "the change's highlight to fade", chromedp.Poll[chromedp.Void](`document.getAnimations().length === 0`))
		browsertest.Screenshot(t, ctx, clitest.RepoPath(t, "docs", "console-fleet.png"))
	}
	loads, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType('navigation').length + (window.__changes ? 0 : 100)`))
	if err != nil || loads != 1 {
		t.Errorf("the page reloaded (navigation entries + lost state = %d, %v)", loads, err)
	}

	// Latency: match each painted change with the stream's.
	type painted struct {
		Node, Status string
		At           int64
	}
	var seen []painted
	clitest.WaitFor(t, "the page to record "+hot+"'s change", 5*time.Second, func() bool {
		var err error
		if seen, err = chromedp.Run(ctx, chromedp.Evaluate[[]painted](`window.__changes`)); err != nil {
			return false
		}
		return slices.ContainsFunc(seen, func(p painted) bool { return p.Node == hot && p.Status == "STATUS_CRIT" })
	})
	mu.Lock()
	got := slices.Clone(changes)
	mu.Unlock()
	var fromStream, fromObserved []time.Duration
	for _, p := range seen {
		at := time.UnixMilli(p.At)
		for i := len(got) - 1; i >= 0; i-- {
			ch := got[i]
			if ch.node == p.Node && ch.status == p.Status && !ch.at.After(at.Add(50*time.Millisecond)) {
				fromStream = append(fromStream, at.Sub(ch.at))
				fromObserved = append(fromObserved, at.Sub(ch.observed))
				t.Logf("%s → %s: painted %v after the test's stream got it, %v after the service observed it", p.Node, p.Status,
					at.Sub(ch.at).Round(time.Millisecond), at.Sub(ch.observed).Round(time.Millisecond))
				break
			}
		}
	}
	if len(fromStream) == 0 {
		t.Fatalf("no painted change matched a stream change: page %v, stream %v", seen, got)
	}
	t.Logf("status change → tile colour: median %v over %d changes after the stream event (max %v); median %v after the service observed it",
		median(fromStream).Round(time.Millisecond), len(fromStream), slices.Max(fromStream).Round(time.Millisecond), median(fromObserved).Round(time.Millisecond))
	if m := median(fromStream); m > 2*time.Second {
		t.Errorf("a status change took %v (median) to reach the tile, want under 2 s", m)
	}

	// A phone's width: nothing wider than the screen, the tiles one column.
	step(t, ctx, 10*time.Second, "a 360 px screen", chromedp.EmulateViewport(360, 740))
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || wide > 360 {
		t.Errorf("at 360 px the page is %d px wide (%v), want no horizontal scrolling", wide, err)
	}
	if dir := os.Getenv(browsertest.ScreenshotsEnv); dir != "" {
		browsertest.Screenshot(t, ctx, filepath.Join(dir, "console-fleet-360.png"))
	}
	noProblems(t, ctx)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func fleetIDs(t *testing.T, fl *sim.Fleet) []string {
	var ids []string
	for _, n := range fl.FleetFile().Nodes {
		ids = append(ids, n.ID)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		t.Fatal("the seed fleet has no nodes")
	}
	return ids
}

func listStatuses(t *testing.T, c llmdiagv1connect.DiagnosisServiceClient) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range res.Msg.GetNodes() {
		out[n.GetId()] = n.GetStatus().String()
	}
	return out
}

// TestConsoleToken: with --auth-tokens the page asks for a token and shows
// no fleet; a reader token shows the fleet, read by polling (a reader may
// not call StreamHealth), and the page says so; a router token follows the
// stream live.
func TestConsoleToken(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the console in Chromium with tokens, about 10 s")
	}
	fl, fleetPath := consoleSim(t)
	ids := fleetIDs(t, fl)
	base, _ := consoleServe(t, fleetPath, len(ids), "adm-0123456789abcdef0123456789abcdef", "--auth-tokens", clitest.RepoPath(t, "auth", "testdata", "tokens.yaml"))

	ctx := browsertest.New(t)
	step(t, ctx, 20*time.Second, "the token form", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.WaitVisible(chromedp.ID("fleet-need-token")))
	if tiles := tileStatuses(t, ctx); len(tiles) != 0 {
		t.Fatalf("tiles without a token: %v", tiles)
	}
	step(t, ctx, 20*time.Second, "a reader token shows the fleet",
		chromedp.SendKeys(chromedp.ID("token-input"), "rdr-0123456789abcdef0123456789abcdef\n"),
		chromedp.WaitVisible(chromedp.CSS(`[data-node="`+ids[0]+`"][data-status^="STATUS_"]`)),
		chromedp.WaitNotVisible(chromedp.ID("token-form")),
		chromedp.WaitVisible(chromedp.CSS(`[data-banner="mode"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="polling"]`)))
	if tiles := tileStatuses(t, ctx); len(tiles) != len(ids) {
		t.Errorf("tiles with a reader token: %v, want %v", tiles, ids)
	}
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('llmdiag.token')`))
	if err != nil || stored != "rdr-0123456789abcdef0123456789abcdef" {
		t.Errorf("sessionStorage llmdiag.token = %q, %v", stored, err)
	}
	// A reload keeps the token (sessionStorage): no form, the fleet again.
	step(t, ctx, 20*time.Second, "reload with the token kept", chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-node="`+ids[0]+`"]`)))
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('token-form').hidden`)); err != nil || !hidden {
		t.Errorf("token form shown after a reload with a kept token (hidden=%v, %v)", hidden, err)
	}
	// A router token follows the stream.
	step(t, ctx, 20*time.Second, "a router token goes live",
		chromedp.Click(chromedp.ID("token-button")),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), "rtr-0123456789abcdef0123456789abcdef\n"),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-node="`+ids[0]+`"]`)))
	// The expected 401 before the token is a console error of the browser
	// (a failed resource); anything else is a problem.
	var others []string
	for _, p := range browsertest.Problems(ctx) {
		if !strings.Contains(p, "status of 401") && !strings.Contains(p, "status of 403") {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(others, "\n"))
	}
}
