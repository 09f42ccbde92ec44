package scrape_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/scrape"
)

const internalExposition = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="internal-only-model"} 3
`

// TestRedirectsFollowedOnlyOnOptIn: a target answering 307 to another
// server is reported down with the status and where it points, and the
// other server is never asked; with follow_redirects it is read.
func TestRedirectsFollowedOnlyOnOptIn(t *testing.T) {
	var internalHits, internalAuth atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		if r.Header.Get("Authorization") != "" {
			internalAuth.Add(1)
		}
		if r.URL.Path == "/missing" {
			http.Error(w, "no such page: hunter2", http.StatusNotFound)
			return
		}
		if r.URL.Path == "/page" {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>internal admin page: hunter2</html>")
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, internalExposition)
	}))
	t.Cleanup(internal.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := internal.URL + "/metrics?token=hunter2"
		switch r.URL.Path {
		case "/to-page":
			to = internal.URL + "/page"
		case "/to-missing":
			to = internal.URL + "/missing"
		}
		w.Header().Set("Location", to)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTemporaryRedirect)
		io.WriteString(w, "<a href=\"elsewhere\">redirect body hunter2</a>")
	}))
	t.Cleanup(redirector.Close)

	targets := []fleet.Node{
		{ID: "no-opt-in", URL: redirector.URL + "/metrics"},
		// The password of the URL goes to the target, not where it redirects.
		{ID: "opt-in", URL: strings.Replace(redirector.URL, "://", "://u:pw@", 1) + "/metrics", FollowRedirects: true},
		{ID: "opt-in-to-page", URL: redirector.URL + "/to-page", FollowRedirects: true},
		{ID: "opt-in-to-missing", URL: redirector.URL + "/to-missing", FollowRedirects: true},
	}
	obs := refreshOnce(t, targets)

	t.Run("not followed", func(t *testing.T) {
		m := obs["no-opt-in"].Metrics
		errs := strings.Join(m.GetErrors(), "; ")
		want := "HTTP 307 Temporary Redirect to " + internal.URL + "/metrics, not followed (follow_redirects: true on the node follows redirects)"
		if m.GetUp() || !strings.Contains(errs, want) {
			t.Fatalf("up %v, errors %q; want down with %q", m.GetUp(), errs, want)
		}
		if strings.Contains(errs, "hunter2") || strings.Contains(errs, "internal-only-model") {
			t.Fatalf("errors %q carry content of an answer", errs)
		}
	})
	t.Run("followed on opt-in", func(t *testing.T) {
		m := obs["opt-in"].Metrics
		if !m.GetUp() || len(m.GetErrors()) != 0 || m.GetModel() != "internal-only-model" {
			t.Fatalf("up %v, model %q, errors %q; want the redirect target read", m.GetUp(), m.GetModel(), m.GetErrors())
		}
	})
	t.Run("followed to a page that is no exposition", func(t *testing.T) {
		m := obs["opt-in-to-page"].Metrics
		errs := strings.Join(m.GetErrors(), "; ")
		want := "HTTP 200 with content type text/html (after redirects to " + internal.URL + "/page), not a Prometheus text exposition"
		if m.GetUp() || !strings.Contains(errs, want) || strings.Contains(errs, "hunter2") {
			t.Fatalf("up %v, errors %q; want down with %q and no content", m.GetUp(), errs, want)
		}
	})
	t.Run("followed to an error", func(t *testing.T) {
		m := obs["opt-in-to-missing"].Metrics
		errs := strings.Join(m.GetErrors(), "; ")
		want := "HTTP 404 Not Found (content type text/plain) (after redirects to " + internal.URL + "/missing)"
		if m.GetUp() || !strings.Contains(errs, want) || strings.Contains(errs, "hunter2") {
			t.Fatalf("up %v, errors %q; want down with %q and no content", m.GetUp(), errs, want)
		}
	})
	// The opted-in targets asked it; the first never did.
	if got := internalHits.Load(); got != 3 {
		t.Fatalf("internal server asked %d times, want 3 (the opted-in targets only)", got)
	}
	if got := internalAuth.Load(); got != 0 {
		t.Fatalf("internal server got the target's credentials %d times", got)
	}
}

// TestNoContentInErrors: an answer other than 200 is named by its status
// code and content type; neither its body nor its reason phrase (both
// chosen by whatever answered) reaches the error, nor a password of the
// target's URL, which is sent as basic authentication.
func TestNoContentInErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	auth := make(chan string, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				select {
				case auth <- req.Header.Get("Authorization"):
				default:
				}
				body := "stack trace: hunter2"
				io.WriteString(c, "HTTP/1.1 503 reason hunter2\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\nContent-Length: "+
					strconv.Itoa(len(body))+"\r\n\r\n"+body)
			}()
		}
	}()
	url := "http://scraper:s3cretpw@" + ln.Addr().String() + "/metrics"
	obs := refreshOnce(t, []fleet.Node{{ID: "a", URL: url}})
	m := obs["a"].Metrics
	errs := strings.Join(m.GetErrors(), "; ")
	want := "scrape http://scraper:xxxxx@" + ln.Addr().String() + "/metrics: HTTP 503 Service Unavailable (content type text/html)"
	if m.GetUp() || errs != want {
		t.Fatalf("up %v, errors %q; want down with %q", m.GetUp(), errs, want)
	}
	if a := <-auth; a != "Basic c2NyYXBlcjpzM2NyZXRwdw==" {
		t.Fatalf("Authorization %q, want the URL's user and password", a)
	}
}

// refreshOnce scrapes targets once and returns the observations by id.
func refreshOnce(t *testing.T, targets []fleet.Node) map[string]source.Observation {
	t.Helper()
	s := scrape.New(targets, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now, scrape.Options{Timeout: 5 * time.Second})
	obs, err := s.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]source.Observation{}
	for _, o := range obs {
		by[o.Node.ID] = o
	}
	return by
}
