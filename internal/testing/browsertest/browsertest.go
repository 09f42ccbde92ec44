package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// StartTimeout bounds the browser's start and the opening of its tab.
const StartTimeout = 60 * time.Second

// Width and Height are the window New opens: a laptop screen.
const (
	Width  = 1280
	Height = 900
)

// ScreenshotsEnv names the directory failure screenshots go to.
const ScreenshotsEnv = "LLMDIAG_SCREENSHOTS"

// maxProblems bounds the errors kept per tab.
const maxProblems = 200

// Chromium is the browser New runs: LLMDIAG_CHROMIUM, then
// /usr/bin/chromium, then chromium on PATH.
var Chromium = testkit.Program{
	Name:       "chromium",
	Env:        "LLMDIAG_CHROMIUM",
	Candidates: []string{"/usr/bin/chromium", "chromium"},
	Get:        "apt-get install -y chromium",
}

// tab is what New keeps for one test's tab.
type tab struct {
	mu       sync.Mutex
	closed   bool // no more logging: the test is ending
	problems []string
}

type tabKey struct{}

// New starts a headless chromium for t and returns a chromedp context for
// one tab of it, at Width×Height. At t's cleanup it saves a screenshot when
// t has failed, then closes the browser.
func New(t testing.TB) context.Context {
	t.Helper()
	path := testkit.Binary(t, Chromium)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.WindowSize(Width, Height),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("lang", "en-US"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tb := &tab{}
	ctx, cancel := chromedp.NewContext(context.WithValue(allocCtx, tabKey{}, tb))
	// The first Do starts the browser, bound to ctx (not to a timeout,
	// which would stop the browser with it): a timer bounds it instead.
	stuck := time.AfterFunc(StartTimeout, cancel)
	err := chromedp.Do(ctx)
	if !stuck.Stop() {
		err = fmt.Errorf("no browser tab within %v (%v)", StartTimeout, err)
	}
	if err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("browsertest: starting %s: %v", path, err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for ev, err := range chromedp.Events(ctx, runtime.ConsoleAPICalled) {
			if err != nil {
				return
			}
			var args []string
			for _, a := range ev.Args {
				args = append(args, remoteText(a))
			}
			msg := "console." + string(ev.Type) + ": " + strings.Join(args, " ")
			tb.note(t, msg, ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert)
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range chromedp.Events(ctx, runtime.ExceptionThrown) {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			tb.note(t, fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber+1, msg), true)
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range chromedp.Events(ctx, log.EntryAdded) {
			if err != nil {
				return
			}
			e := ev.Entry
			tb.note(t, fmt.Sprintf("browser %s %s: %s %s", e.Source, e.Level, e.Text, e.URL), e.Level == log.EntryLevelError)
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			failureShot(t, ctx)
		}
		tb.mu.Lock()
		tb.closed = true
		tb.mu.Unlock()
		cancel()
		cancelAlloc()
		wg.Wait()
	})
	return ctx
}

// note logs one message of the page, keeping errors for Problems.
func (tb *tab) note(t testing.TB, msg string, isErr bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return
	}
	t.Log("browser: " + msg)
	if isErr && len(tb.problems) < maxProblems {
		tb.problems = append(tb.problems, msg)
	}
}

// Problems returns the errors the tab has seen so far: uncaught
// exceptions, console.error calls and browser log errors (a blocked
// resource or a Content-Security-Policy violation).
func Problems(ctx context.Context) []string {
	tb, ok := ctx.Value(tabKey{}).(*tab)
	if !ok {
		return nil
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.problems...)
}

func remoteText(a *runtime.RemoteObject) string {
	switch {
	case a == nil:
		return ""
	case a.Description != "":
		return a.Description
	case len(a.Value) > 0:
		return string(a.Value)
	default:
		return string(a.Type)
	}
}

// Screenshot saves a PNG of the whole page to path (its directory is
// made), within 30 s.
func Screenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	if err := screenshot(ctx, path); err != nil {
		t.Fatalf("browsertest: screenshot %s: %v", path, err)
	}
}

func screenshot(ctx context.Context, path string) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// failureShot saves the failing page's screenshot and HTML into the
// screenshots directory and names them in the log.
func failureShot(t testing.TB, ctx context.Context) {
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "llmdiag-screenshots-"); err != nil {
			t.Logf("browsertest: no directory for the failure screenshot: %v", err)
			return
		}
	}
	base := filepath.Join(dir, unsafeName.ReplaceAllString(t.Name(), "_"))
	if err := screenshot(ctx, base+".png"); err != nil {
		t.Logf("browsertest: failure screenshot: %v", err)
	} else {
		t.Logf("browsertest: the failing page's screenshot is %s.png (%s=%s to choose the directory)", base, ScreenshotsEnv, dir)
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	html, err := chromedp.Run(hctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err == nil {
		if err := os.WriteFile(base+".html", []byte(html), 0o644); err == nil {
			t.Logf("browsertest: its HTML is %s.html", base)
		}
	}
}
