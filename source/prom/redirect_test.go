package prom

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// headerLog records the credentials each request to a server carried.
type headerLog struct {
	mu   sync.Mutex
	seen []string // "path Authorization X-Scope-OrgID"
}

func (h *headerLog) add(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Scope-OrgID"))
}

func (h *headerLog) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = nil
}

func (h *headerLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// TestRedirectToAnotherHostRefused: the configured Prometheus answers 307
// to another server; no credential or tenant header reaches it (it is
// never asked at all), and the refresh fails naming the refused redirect.
// A redirect to the configured origin is followed with the credentials.
func TestRedirectToAnotherHostRefused(t *testing.T) {
	var other headerLog
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.add(r)
		w.Write(emptyVector.Body)
	}))
	defer elsewhere.Close()
	var own headerLog
	var configured *httptest.Server
	configured = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own.add(r)
		switch {
		case strings.HasPrefix(r.URL.Path, "/cross/"):
			http.Redirect(w, r, elsewhere.URL+strings.TrimPrefix(r.URL.Path, "/cross"), http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/same/"):
			http.Redirect(w, r, configured.URL+"/moved/"+strings.TrimPrefix(r.URL.Path, "/same/"), http.StatusTemporaryRedirect)
		default:
			w.Write(emptyVector.Body)
		}
	}))
	defer configured.Close()
	token := writeFile(t, "token", "t0ken-s3cret\n")

	for _, tc := range []struct {
		name, url string
		cfg       Config
		wantAuth  string
	}{
		{name: "bearer token", url: configured.URL + "/cross", cfg: Config{BearerTokenFile: token}, wantAuth: "Bearer t0ken-s3cret"},
		{name: "password in the url", url: strings.Replace(configured.URL, "http://", "http://llmdiag:pw-s3cret@", 1) + "/cross", wantAuth: "Basic bGxtZGlhZzpwdy1zM2NyZXQ="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own.reset()
			cfg := tc.cfg
			cfg.URL = tc.url
			cfg.Headers = map[string]string{"X-Scope-OrgID": "tenant-1"}
			s, err := New(cfg, quietLog(), func() time.Time { return testNow })
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Refresh(context.Background(), "5m")
			// Checked first: what leaked, should anything have.
			if got := other.all(); len(got) != 0 {
				t.Fatalf("the other host got %d requests (%q), want none", len(got), got)
			}
			want := "refused to send prometheus credentials to " + elsewhere.URL + ": they go to the configured " + configured.URL + " only"
			if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Refresh: %v; want ErrNoData naming %q", err, want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("Refresh: %v: the error carries a credential", err)
			}
			if len(own.all()) == 0 {
				t.Fatal("the configured host got no request")
			}
			for _, g := range own.all() {
				if !strings.HasSuffix(g, " "+tc.wantAuth+" tenant-1") {
					t.Fatalf("the configured host got %q, want credentials %q", g, tc.wantAuth)
				}
			}
		})
	}

	t.Run("same origin followed", func(t *testing.T) {
		own.reset()
		s, err := New(Config{URL: configured.URL + "/same", BearerTokenFile: token, Headers: map[string]string{"X-Scope-OrgID": "tenant-1"}}, quietLog(), func() time.Time { return testNow })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Refresh(context.Background(), "5m"); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		moved := 0
		for _, g := range own.all() {
			if !strings.HasSuffix(g, " Bearer t0ken-s3cret tenant-1") {
				t.Fatalf("request %q lacks the credentials", g)
			}
			if strings.HasPrefix(g, "/moved/") {
				moved++
			}
		}
		if moved == 0 || moved != s.QueriesLastRefresh() {
			t.Fatalf("%d queries followed to /moved/, want all %d", moved, s.QueriesLastRefresh())
		}
	})

	// The transport itself refuses another origin, whoever asks.
	t.Run("transport", func(t *testing.T) {
		rt, err := transport(Config{URL: configured.URL, BearerTokenFile: token}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, elsewhere.URL+"/api/v1/query", nil)
		if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("RoundTrip to another host: %v, want refused", err)
		}
		if got := other.all(); len(got) != 0 {
			t.Fatalf("the other host got %q", got)
		}
	})
}

// TestErrorBodyNotEchoed: an error answer that is not the API's JSON is
// described by size and content type; Prometheus's own error string is kept.
func TestErrorBodyNotEchoed(t *testing.T) {
	w := &worker{ctype: "text/html"}
	w.buf.WriteString("<html>proxy login: hunter2</html>")
	if got := detail(w); got != "33 bytes of text/html" {
		t.Fatalf("detail = %q", got)
	}
	w.buf.Reset()
	w.ctype = "application/json"
	w.buf.WriteString(`{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`)
	if got := detail(w); got != "parse error at char 3" {
		t.Fatalf("detail = %q", got)
	}
}

// TestURLRedactedInErrors: a configuration error names the URL without
// its password.
func TestURLRedactedInErrors(t *testing.T) {
	token := writeFile(t, "token", "x")
	for _, cfg := range []Config{
		{URL: "ftp://u:pw-s3cret@host"},
		{URL: "http://u:pw-s3cret@host:99999999999x"},
		{URL: "http://u:pw-s3cret@host", BearerTokenFile: token},
	} {
		_, err := New(cfg, quietLog(), time.Now)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): %v, want an error without the password", cfg.URL, err)
		}
	}
}
