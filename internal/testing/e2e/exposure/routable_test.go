package exposure_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// routerToken is a router's token in the tests' token files.
const routerToken = "router-token-0123456789abcdef"

// routableTokens writes a tokens file with a reader, a router and an admin.
func routableTokens(t *testing.T) string {
	t.Helper()
	return clitest.WriteFile(t, "tokens.yaml", "tokens:\n"+
		"  - {name: grafana, role: reader, token: "+clitest.ReaderToken+"}\n"+
		"  - {name: envoy, role: router, token: "+routerToken+"}\n"+
		"  - {name: oncall, role: admin, token: "+clitest.AdminToken+"}\n")
}

// routableGet is a health checker's GET (or HEAD) of /routable/{node}:
// the status, the body and the stale header.
func routableGet(t *testing.T, method, url, token, accept string) (code int, body, stale string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if cc := resp.Header.Get("Cache-Control"); resp.StatusCode < 400 || resp.StatusCode == http.StatusServiceUnavailable {
		if cc != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", method, url, cc)
		}
	}
	return resp.StatusCode, string(b), resp.Header.Get("X-Llmdiag-Stale")
}

// TestServeRoutableRoles runs serve with --auth-tokens, once with the
// default --routable-fail-open and once with --routable-fail-open=false,
// on an idle node (routable) and one whose target does not answer (DOWN):
// a router (and an admin) reads 200 and 503, a reader is refused (403), no
// credential unauthenticated (401), as the procedures answer. (Stale data
// under either switch is TestRoutableHandler's, in package server.)
func TestServeRoutableRoles(t *testing.T) {
	tokens := routableTokens(t)
	// An idle vLLM (its gauges, nothing running or waiting) and a node
	// whose target does not answer.
	idle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "vllm:num_requests_running{model_name=\"m\"} 0\nvllm:num_requests_waiting{model_name=\"m\"} 0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.01\n")
	}))
	defer idle.Close()
	targets := []string{"--target", "idle-0=" + idle.URL + "/metrics", "--target", "node-under-test=http://" + testkit.ClosedAddr(t) + "/metrics"}
	open, closed := testkit.FreeAddr(t), testkit.FreeAddr(t)
	clitest.Background(t, nil, append([]string{"serve", "--listen", open, "--auth-tokens", tokens, "--log-level", "error"}, targets...)...)
	clitest.Background(t, nil, append([]string{"serve", "--listen", closed, "--auth-tokens", tokens, "--routable-fail-open=false", "--log-level", "error"}, targets...)...)
	for _, a := range []string{open, closed} {
		// Until the first refresh has stored the node, it is unknown data
		// too: wait for its verdict.
		var last string
		clitest.WaitFor(t, "node-under-test's verdict on "+a, 30*time.Second, func() bool {
			_, body, _ := routableGet(t, http.MethodGet, "http://"+a+"/routable/node-under-test", routerToken, "application/json")
			last = body
			var ans struct{ Status string }
			return json.Unmarshal([]byte(body), &ans) == nil && ans.Status != ""
		}, &last)
	}
	node := "/routable/node-under-test"
	if code, body, _ := routableGet(t, "GET", "http://"+open+"/routable/idle-0", routerToken, "application/json"); code != 200 || !strings.Contains(body, `"routable":true`) {
		t.Errorf("idle-0 as JSON: HTTP %d %s", code, body)
	}
	for _, c := range []struct {
		name, method, url, token string
		code                     int
		body, stale              string
	}{
		{"router, idle", "GET", "http://" + open + "/routable/idle-0", routerToken, 200, "routable ", ""},
		{"router, idle, HEAD", "HEAD", "http://" + open + "/routable/idle-0", routerToken, 200, "", ""},
		{"router, idle, --routable-fail-open=false", "GET", "http://" + closed + "/routable/idle-0", routerToken, 200, "routable ", ""},
		{"router, down", "GET", "http://" + open + node, routerToken, 503, "not routable: STATUS_DOWN CAUSE_TARGET_DOWN\n", ""},
		{"router, down, HEAD", "HEAD", "http://" + open + node, routerToken, 503, "", ""},
		{"admin, idle", "GET", "http://" + open + "/routable/idle-0", clitest.AdminToken, 200, "routable ", ""},
		{"admin, down", "GET", "http://" + closed + node, clitest.AdminToken, 503, "not routable: STATUS_DOWN CAUSE_TARGET_DOWN\n", ""},
		{"router, unknown node", "GET", "http://" + open + "/routable/nobody", routerToken, 404, "unknown node \"nobody\"\n", ""},
		{"router, bad id", "GET", "http://" + open + "/routable/-x", routerToken, 400, "", ""},
		{"reader", "GET", "http://" + open + "/routable/idle-0", clitest.ReaderToken, 403, "", ""},
		{"reader, fail-closed", "GET", "http://" + closed + node, clitest.ReaderToken, 403, "", ""},
		{"no credential", "GET", "http://" + open + "/routable/idle-0", "", 401, "", ""},
		{"no credential, HEAD", "HEAD", "http://" + open + "/routable/idle-0", "", 401, "", ""},
		{"unknown token", "GET", "http://" + closed + node, "x-0123456789abcdefghij", 401, "", ""},
	} {
		code, body, stale := routableGet(t, c.method, c.url, c.token, "")
		if code != c.code || stale != c.stale || !strings.HasPrefix(body, c.body) || (c.method == "HEAD" && body != "") {
			t.Errorf("%s: HTTP %d %q (stale header %q), want %d %q (%q)", c.name, code, body, stale, c.code, c.body, c.stale)
		}
		if c.method == "GET" && (c.code == 403 && !strings.Contains(body, "permission_denied") || c.code == 401 && !strings.Contains(body, "unauthenticated")) {
			t.Errorf("%s: body %q, want the Connect error the procedures answer", c.name, body)
		}
	}
}

// TestRoutableSimulated serves the simulator's overloaded scenario with
// authentication on and checks /routable/{node} as a router's health
// checker sees it: 200 with the load score for the healthy peer, 503
// naming status and cause once glm-4.6-0 is saturated.
func TestRoutableSimulated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the simulated overloaded fleet, up to two minutes")
	}
	fleetPath := filepath.Join(t.TempDir(), "fleet.yaml")
	clitest.Sim(t, "overloaded", fleetPath)
	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--fleet", fleetPath, "--interval", "1s", "--auth-tokens", routableTokens(t), "--log-level", "warn")
	base := "http://" + addr + "/routable/"
	// Both read up by a refresh: glm-4.6-0 not routable for its load (not
	// because a scrape timed out on a busy machine), glm-4.6-1 routable.
	var last, saturated string
	clitest.WaitFor(t, "glm-4.6-0 saturated and glm-4.6-1 routable", 120*time.Second, func() bool {
		code, body, _ := routableGet(t, http.MethodGet, base+"glm-4.6-0", routerToken, "")
		peer, peerBody, stale := routableGet(t, http.MethodGet, base+"glm-4.6-1", routerToken, "")
		last, saturated = fmt.Sprintf("glm-4.6-0: HTTP %d %q; glm-4.6-1: HTTP %d %q (stale %q)", code, body, peer, peerBody, stale), body
		return code == http.StatusServiceUnavailable && !strings.Contains(body, "CAUSE_TARGET_DOWN") && !strings.Contains(body, "CAUSE_NO_DATA") &&
			peer == http.StatusOK && strings.HasPrefix(peerBody, "routable 0.") && stale == ""
	}, &last)
	t.Log(last)
	if !strings.HasPrefix(saturated, "not routable: STATUS_") || !strings.Contains(saturated, " CAUSE_") {
		t.Errorf("glm-4.6-0: %q, want its status and cause", saturated)
	}
	if code, _, _ := routableGet(t, http.MethodGet, base+"glm-4.6-1", clitest.ReaderToken, ""); code != http.StatusForbidden {
		t.Errorf("glm-4.6-1 as a reader: HTTP %d, want 403", code)
	}
}
