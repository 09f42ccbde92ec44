package testkit

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
