package browsertest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmdiag/llmdiag/internal/testing/browsertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestTab loads a page whose inline script the CSP blocks and whose own
// script throws: the tab reads the DOM, Problems reports both, and
// Screenshot writes a PNG.
func TestTab(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!DOCTYPE html><title>t</title><p id="p">static</p><script>document.title = "inline ran"</script><script src="/a.js"></script>`))
	})
	mux.HandleFunc("GET /a.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write([]byte(`document.getElementById("p").dataset.ran = "yes"; throw new Error("boom-4711");`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx := browsertest.New(t)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#p[data-ran="yes"]`))); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(wctx, chromedp.Title())
	if err != nil || title != "t" {
		t.Errorf("title = %q, %v; want t (the CSP blocks the inline script)", title, err)
	}
	// Both reports arrive as events: wait for them, bounded.
	var all string
	testkit.Wait{For: 10 * time.Second, Every: 50 * time.Millisecond, Last: func() string { return all }}.Until(t, "the exception and the CSP violation in Problems", func() bool {
		all = strings.Join(browsertest.Problems(ctx), "\n")
		return strings.Contains(all, "boom-4711") && strings.Contains(all, "Content Security Policy")
	})
	png := filepath.Join(t.TempDir(), "shot", "page.png")
	browsertest.Screenshot(t, ctx, png)
	b, err := os.ReadFile(png)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %d bytes, %v; want a PNG", png, len(b), err)
	}
}
