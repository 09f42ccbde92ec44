package runbook_test

import (
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/auth"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/runbook"
)

func TestHandlerStatus(t *testing.T) {
	h := runbook.Handler()
	tests := []struct {
		name, method, target string
		want                 int
		contains             string
	}{
		{"index", http.MethodGet, auth.RunbooksPrefix, http.StatusOK, "llmdiag runbooks"},
		{"index zh", http.MethodGet, auth.RunbooksPrefix + "?lang=zh", http.StatusOK, "llmdiag 运行手册"},
		{"overloaded", http.MethodGet, auth.RunbooksPrefix + "overloaded", http.StatusOK, "<h1>Overloaded</h1>"},
		{"overloaded en", http.MethodGet, auth.RunbooksPrefix + "overloaded?lang=en", http.StatusOK, "<h1>Overloaded</h1>"},
		{"overloaded zh", http.MethodGet, auth.RunbooksPrefix + "overloaded?lang=zh", http.StatusOK, "<h1>过载</h1>"},
		{"links en", http.MethodGet, auth.RunbooksPrefix + "overloaded", http.StatusOK, `<a href="kv-exhausted">`},
		{"links zh", http.MethodGet, auth.RunbooksPrefix + "overloaded?lang=zh", http.StatusOK, `<a href="kv-exhausted?lang=zh">`},
		{"head", http.MethodHead, auth.RunbooksPrefix + "overloaded", http.StatusOK, ""},
		{"unknown slug", http.MethodGet, auth.RunbooksPrefix + "no-such-cause", http.StatusNotFound, "no runbook"},
		{"unspecified", http.MethodGet, auth.RunbooksPrefix + "unspecified", http.StatusNotFound, "no runbook"},
		{"nested", http.MethodGet, auth.RunbooksPrefix + "overloaded/x", http.StatusNotFound, "no runbook"},
		{"markdown name", http.MethodGet, auth.RunbooksPrefix + "overloaded.md", http.StatusNotFound, "no runbook"},
		{"outside prefix", http.MethodGet, "/runbook/overloaded", http.StatusNotFound, ""},
		{"bad lang", http.MethodGet, auth.RunbooksPrefix + "overloaded?lang=fr", http.StatusBadRequest, "lang"},
		{"post", http.MethodPost, auth.RunbooksPrefix + "overloaded", http.StatusMethodNotAllowed, "GET and HEAD"},
		{"put", http.MethodPut, auth.RunbooksPrefix, http.StatusMethodNotAllowed, "GET and HEAD"},
		{"delete", http.MethodDelete, auth.RunbooksPrefix + "overloaded", http.StatusMethodNotAllowed, "GET and HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.want {
				t.Fatalf("%s %s: status %d, want %d (%s)", tt.method, tt.target, res.StatusCode, tt.want, body)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Errorf("%s %s: body lacks %q:\n%s", tt.method, tt.target, tt.contains, body)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if tt.want == http.StatusMethodNotAllowed && res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q, want GET, HEAD", res.Header.Get("Allow"))
			}
			if tt.want == http.StatusOK {
				if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for c, want := range map[llmdiagv1.Cause]string{
		llmdiagv1.Cause_CAUSE_KV_EXHAUSTED: "kv-exhausted",
		llmdiagv1.Cause_CAUSE_OVERLOADED:   "overloaded",
		llmdiagv1.Cause_CAUSE_NO_DATA:      "no-data",
		llmdiagv1.Cause_CAUSE_UNSPECIFIED:  "",
		llmdiagv1.Cause(999):               "",
	} {
		if got := runbook.Slug(c); got != want {
			t.Errorf("Slug(%v) = %q, want %q", c, got, want)
		}
	}
}

// TestHandlerEveryRunbook checks that every runbook renders in both
// languages, links to its other language and the index, and that the
// Content-Security-Policy admits the page's style and nothing else.
func TestHandlerEveryRunbook(t *testing.T) {
	srv := httptest.NewServer(runbook.Handler())
	defer srv.Close()
	get := func(t *testing.T, method, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}
	styleRe := regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	checkPage := func(t *testing.T, res *http.Response, body string) {
		t.Helper()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("Content-Type %q", ct)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Error("no X-Content-Type-Options: nosniff")
		}
		m := styleRe.FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no <style> in the page")
		}
		sum := sha256.Sum256([]byte(m[1]))
		want := "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
		if got := res.Header.Get("Content-Security-Policy"); got != want {
			t.Errorf("Content-Security-Policy\n got %q\nwant %q (the hash of the page's style)", got, want)
		}
		if strings.Contains(strings.ToLower(body), "<script") {
			t.Error("the page holds a script")
		}
	}
	_, index := get(t, http.MethodGet, auth.RunbooksPrefix)
	_, indexZH := get(t, http.MethodGet, auth.RunbooksPrefix+"?lang=zh")
	for _, c := range runbook.Causes() {
		slug := runbook.Slug(c)
		t.Run(slug, func(t *testing.T) {
			for _, tc := range []struct {
				query, other string
				lang         llmdiagv1.Language
				index        string
			}{
				{"", `href="` + slug + `?lang=zh"`, llmdiagv1.Language_LANGUAGE_EN, index},
				{"?lang=zh", `href="` + slug + `"`, llmdiagv1.Language_LANGUAGE_ZH, indexZH},
			} {
				res, body := get(t, http.MethodGet, auth.RunbooksPrefix+slug+tc.query)
				checkPage(t, res, body)
				title := runbook.Title(c, tc.lang)
				if !strings.Contains(body, "<h1>"+html.EscapeString(title)+"</h1>") {
					t.Errorf("%s: no <h1>%s</h1>", tc.query, title)
				}
				if !strings.Contains(body, tc.other) {
					t.Errorf("%s: no link to the other language (%s)", tc.query, tc.other)
				}
				if !strings.Contains(tc.index, `>`+html.EscapeString(title)+`</a>`) {
					t.Errorf("the %v index does not list %q", tc.lang, title)
				}
				head, headBody := get(t, http.MethodHead, auth.RunbooksPrefix+slug+tc.query)
				if head.StatusCode != http.StatusOK || headBody != "" {
					t.Errorf("HEAD: status %d, body %d bytes", head.StatusCode, len(headBody))
				}
			}
		})
	}
}
