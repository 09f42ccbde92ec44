package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/openapi"
	"github.com/llmdiag/llmdiag/server"
)

// restFixture serves routableFixture's nodes as serve does: the REST paths
// in front of authorization (a reader and a router token), GetRoutability
// failing open, reads cached for 5 s.
func restFixture(t *testing.T) string {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	svc := routableFixture(t, now, server.RoutableFallback{FailOpen: true})
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: grafana, role: reader, token: "+readerToken+"}\n  - {name: router-eu-1, role: router, token: "+routerToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := auth.OpenFile(tokens, auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.REST(server.Authorize(server.NewHandler(svc, server.NewHealth(nil), server.Surfaces{GetMaxAge: 5 * time.Second}), &auth.Authenticator{Tokens: file}, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestREST: the reads at their resource URLs answer as the RPCs, with the
// RPCs' authorization and caching; every refusal, the transcoder's own
// included, is its HTTP status with a google.rpc.Status JSON body.
func TestREST(t *testing.T) {
	url := restFixture(t)
	for _, c := range []struct {
		name, method, path, token string
		code                      int
		rpcCode                   int    // google.rpc.Status code of an error
		has                       string // the body holds it
		cache                     string // Cache-Control
	}{
		{"node", "GET", "/v1/nodes/healthy-0", readerToken, 200, 0, `"id":"healthy-0"`, "private, max-age=5"},
		{"node id with slash and colon", "GET", "/v1/nodes/pool%2Fa:0", readerToken, 200, 0, `"id":"pool/a:0"`, "private, max-age=5"},
		{"read mask", "GET", "/v1/nodes/healthy-0?readMask=status", readerToken, 200, 0, `{"node":{"status":"STATUS_OK"}}`, "private, max-age=5"},
		{"read mask, proto names", "GET", "/v1/nodes/healthy-0?read_mask=root_cause,load_score", readerToken, 200, 0, `"loadScore":0.31}}`, "private, max-age=5"},
		{"list, filtered", "GET", "/v1/nodes?status=STATUS_CRIT&readMask=id", routerToken, 200, 0, `{"nodes":[{"id":"stalled-0"}]}`, "private, max-age=5"},
		{"routable", "GET", "/v1/nodes/pool%2Fa:0/routable", routerToken, 200, 0, `"routable":true`, "no-store"},
		{"not routable", "GET", "/v1/nodes/stalled-0/routable", routerToken, 200, 0, `"routable":false`, "no-store"},
		{"stale: fails open", "GET", "/v1/nodes/stale-0/routable", routerToken, 200, 0, `"staleReason":"data older than 30s"`, "no-store"},
		{"routable: not a reader's", "GET", "/v1/nodes/healthy-0/routable", readerToken, 403, 7, "may not call /llmdiag.v1.DiagnosisService/GetRoutability", "no-store"},
		{"no token", "GET", "/v1/nodes/healthy-0", "", 401, 16, "", ""},
		{"unknown node", "GET", "/v1/nodes/nobody-0", readerToken, 404, 5, `nobody-0`, "no-store"},
		{"unknown node with a slash", "GET", "/v1/nodes/ns%2Fpod:8000/metrics", readerToken, 404, 5, `ns/pod:8000`, "no-store"},
		{"invalid node id", "GET", "/v1/nodes/-bad", readerToken, 400, 3, "node: ", "no-store"},
		{"unknown query parameter", "GET", "/v1/nodes?bogus=1", readerToken, 400, 3, "bogus", "no-store"},
		{"bad enum", "GET", "/v1/nodes?engine=ENGINE_NOPE", readerToken, 400, 3, "engine", "no-store"},
		{"no such resource", "GET", "/v1/nope", readerToken, 404, 5, "no REST resource at GET /v1/nope", "no-store"},
		{"not a GET", "POST", "/v1/nodes", readerToken, 405, 12, "", "no-store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, url+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.code {
				t.Fatalf("HTTP %d, want %d: %s", res.StatusCode, c.code, body)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if !bytes.Contains(body, []byte(c.has)) {
				t.Errorf("body %s, want it to hold %s", body, c.has)
			}
			if c.cache != "" {
				if got := res.Header.Get("Cache-Control"); got != c.cache {
					t.Errorf("Cache-Control %q, want %q", got, c.cache)
				}
			}
			if c.code < 300 {
				return
			}
			var st struct {
				Code    *int   `json:"code"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(body, &st); err != nil || st.Code == nil || st.Message == "" {
				t.Fatalf("not a google.rpc.Status: %s (%v)", body, err)
			}
			if *st.Code != c.rpcCode {
				t.Errorf("code %d, want %d: %s", *st.Code, c.rpcCode, body)
			}
			if c.code == 405 && res.Header.Get("Allow") != "GET" {
				t.Errorf("Allow %q, want GET", res.Header.Get("Allow"))
			}
		})
	}
}

// TestRESTLeavesOtherPathsAlone: Connect calls and the public document
// do not pass through the transcoder.
func TestRESTLeavesOtherPathsAlone(t *testing.T) {
	url := restFixture(t)
	req, _ := http.NewRequest(http.MethodPost, url+"/llmdiag.v1.DiagnosisService/GetNode", strings.NewReader(`{"node":"healthy-0"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+readerToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Contains(body, []byte(`"id":"healthy-0"`)) {
		t.Errorf("Connect GetNode: HTTP %d %s", res.StatusCode, body)
	}

	res, err = http.Get(url + auth.OpenAPIPath) // no token: public
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Equal(body, openapi.Document) {
		t.Errorf("GET %s: HTTP %d, %d bytes, want the document's %d", auth.OpenAPIPath, res.StatusCode, len(body), len(openapi.Document))
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type %q", ct)
	}
}
