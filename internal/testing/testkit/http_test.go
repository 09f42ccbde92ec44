package testkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/grpchealth"
)

func TestBearer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Header.Get("Authorization")))
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := (&http.Client{Transport: Bearer{Token: "t0ken"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b [64]byte
	n, _ := resp.Body.Read(b[:])
	if got := string(b[:n]); got != "Bearer t0ken" {
		t.Fatalf("Authorization %q, want Bearer t0ken", got)
	}
	if req.Header.Get("Authorization") != "" {
		t.Fatal("the caller's request was changed")
	}
}

func TestHealthStatus(t *testing.T) {
	checker := grpchealth.NewStaticChecker("up")
	checker.SetStatus("down", grpchealth.StatusNotServing)
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(checker))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct{ service, want, err string }{
		{"", "SERVING", ""},
		{"up", "SERVING", ""},
		{"down", "NOT_SERVING", ""},
		{"nobody", "", "404"},
	} {
		got, err := HealthStatus(context.Background(), srv.Client(), srv.URL, c.service)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("HealthStatus(%q) = %q, %v; want %q, error with %q", c.service, got, err, c.want, c.err)
		}
	}
}
