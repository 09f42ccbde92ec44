package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/console"
)

// maxPageWeight bounds what one page load transfers.
const maxPageWeight = 300 << 10

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestHeadersAndContentTypes(t *testing.T) {
	h := console.Handler(console.Options{})
	for _, tc := range []struct {
		path, contentType string
	}{
		{"/", "text/html; charset=utf-8"},
		{"/console/index.html", "text/html; charset=utf-8"},
		{"/console/app.css", "text/css; charset=utf-8"},
		{"/console/app.js", "text/javascript; charset=utf-8"},
		{"/console/api.js", "text/javascript; charset=utf-8"},
		{"/console/pages/fleet.js", "text/javascript; charset=utf-8"},
		{"/console/icon.svg", "image/svg+xml"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := get(t, h, http.MethodGet, tc.path)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200", tc.path, rec.Code)
			}
			want := map[string]string{
				"Content-Type":            tc.contentType,
				"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
				"Cache-Control":           "no-cache",
			}
			for k, v := range want {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s: %s = %q, want %q", tc.path, k, got, v)
				}
			}
			if rec.Header().Get("ETag") == "" {
				t.Errorf("%s: no ETag", tc.path)
			}
		})
	}
}

func TestEveryAssetServed(t *testing.T) {
	h := console.Handler(console.Options{})
	assets := console.Assets(console.Options{})
	for _, want := range []string{"index.html", "app.js", "api.js", "app.css", "pages/fleet.js", "pages/node.js", "pages/compare.js"} {
		if !slices.Contains(assets, want) {
			t.Errorf("embedded assets %v lack %s", assets, want)
		}
	}
	for _, a := range assets {
		rec := get(t, h, http.MethodGet, "/console/"+a)
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("GET /console/%s = %d with %d bytes, want 200 and the file", a, rec.Code, rec.Body.Len())
		}
		if ct := rec.Header().Get("Content-Type"); ct == "application/octet-stream" {
			t.Errorf("/console/%s has no known content type", a)
		}
		head := get(t, h, http.MethodHead, "/console/"+a)
		if head.Code != http.StatusOK || head.Body.Len() != 0 {
			t.Errorf("HEAD /console/%s = %d with %d bytes, want 200 and no body", a, head.Code, head.Body.Len())
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	h := console.Handler(console.Options{})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/console/nope.js", http.StatusNotFound},
		{http.MethodGet, "/console/", http.StatusNotFound},
		{http.MethodGet, "/console/../console/app.js", http.StatusNotFound},
		{http.MethodGet, "/console//app.js", http.StatusNotFound},
		{http.MethodGet, "/console/pages/../app.js", http.StatusNotFound},
		{http.MethodGet, "/index.html", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodPut, "/console/app.js", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/console/app.js", http.StatusMethodNotAllowed},
		{http.MethodOptions, "/", http.StatusMethodNotAllowed},
		{http.MethodHead, "/", http.StatusOK},
	} {
		rec := get(t, h, tc.method, tc.path)
		if rec.Code != tc.code {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, rec.Code, tc.code)
		}
		if tc.code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow = %q, want GET, HEAD", tc.method, tc.path, rec.Header().Get("Allow"))
		}
		if rec.Header().Get("Content-Security-Policy") != console.CSP {
			t.Errorf("%s %s: no CSP on the answer", tc.method, tc.path)
		}
	}
}

func TestRevalidation(t *testing.T) {
	h := console.Handler(console.Options{})
	first := get(t, h, http.MethodGet, "/console/app.js")
	req := httptest.NewRequest(http.MethodGet, "/console/app.js", nil)
	req.Header.Set("If-None-Match", first.Header().Get("ETag"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Fatalf("GET with the ETag = %d, want 304", rec.Code)
	}
}

var (
	// refRE finds what the HTML and the modules reference on this origin.
	refRE    = regexp.MustCompile(`(?:href|src)="(/console/[^"]+)"|(?:import|from)\s*\(?\s*['"](\.{1,2}/[^'"]+)['"]`)
	inlineRE = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=|javascript:`)
)

// TestIndexHasNoInline checks index.html holds no inline script, style,
// style attribute or event handler: the CSP would block them.
func TestIndexHasNoInline(t *testing.T) {
	h := console.Handler(console.Options{})
	body := get(t, h, http.MethodGet, "/").Body.String()
	if m := inlineRE.FindString(body); m != "" {
		t.Errorf("index.html has inline script or style: %q", m)
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
		if !strings.Contains(tag, `src="/console/`) {
			t.Errorf("script %s is not one of the console's files", tag)
		}
	}
	for _, want := range []string{`<link rel="stylesheet" href="/console/app.css">`, `<script type="module" src="/console/app.js"></script>`} {
		if !strings.Contains(body, want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
}

// TestPageWeight follows every reference from index.html (links, scripts,
// images, static and dynamic imports) and bounds the sum of what a load
// can fetch: index and everything it reaches, every page included.
func TestPageWeight(t *testing.T) {
	h := console.Handler(console.Options{})
	seen := map[string]int{}
	var visit func(path string)
	visit = func(path string) {
		if _, ok := seen[path]; ok {
			return
		}
		rec := get(t, h, http.MethodGet, path)
		if rec.Code != http.StatusOK {
			t.Errorf("referenced %s = %d", path, rec.Code)
			return
		}
		b, _ := io.ReadAll(rec.Body)
		seen[path] = len(b)
		dir := path[:strings.LastIndex(path, "/")+1]
		for _, m := range refRE.FindAllStringSubmatch(string(b), -1) {
			switch {
			case m[1] != "":
				visit(m[1])
			case m[2] != "":
				visit(resolve(dir, m[2]))
			}
		}
	}
	visit("/")
	total := 0
	for _, n := range seen {
		total += n
	}
	t.Logf("a page load fetches at most %d files, %.1f KB (uncompressed)", len(seen), float64(total)/1024)
	for _, want := range []string{"/console/app.js", "/console/api.js", "/console/app.css", "/console/pages/fleet.js", "/console/pages/node.js", "/console/pages/compare.js"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("the walk from / did not reach %s (found %v)", want, seen)
		}
	}
	if total >= maxPageWeight {
		t.Errorf("a page load is %d bytes, want under %d", total, maxPageWeight)
	}
}

// resolve joins a relative module specifier to the directory it is in.
func resolve(dir, rel string) string {
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	for _, p := range strings.Split(rel, "/") {
		switch p {
		case ".":
		case "..":
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}
