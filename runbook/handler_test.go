package runbook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
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
