package clients_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// slackPost sends Slack's slash command with text to base, signed with
// secret at the current second unless secret is empty, and returns the
// status and body.
func slackPost(t *testing.T, base, secret, text, responseURL string) (int, string) {
	t.Helper()
	return slackPostAt(t, base, secret, text, responseURL, time.Now().Unix())
}

// slackPostAt is slackPost with the request's timestamp.
func slackPostAt(t *testing.T, base, secret, text, responseURL string, at int64) (int, string) {
	t.Helper()
	body := url.Values{"command": {"/llmdiag"}, "text": {text}, "response_url": {responseURL}, "user_id": {"U1"}}.Encode()
	req, err := http.NewRequest(http.MethodPost, base+auth.SlackCommandPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		ts := strconv.FormatInt(at, 10)
		m := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(m, "v0:%s:%s", ts, body)
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSlackCommandEndToEnd is `make run` with the Slack command on, behind
// authentication: Slack's signed `diagnose deepseek-v4-0` gets the
// decode-bound verdict through serve's whole handler chain, inline or at
// the response_url; unsigned and replayed requests are refused by the
// command's own check (the bearer check lets the path through); without
// the flag the path is not served.
func TestSlackCommandEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Slack command on the simulated seed fleet")
	}
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	clitest.Sim(t, "seed", fleetPath)

	const secret = "e2e-slack-signing-secret-0123456789"
	secretPath, tokens := filepath.Join(dir, "slack-secret"), filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(secretPath, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: grafana, role: reader, token: "+clitest.ReaderToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The response_url: answers slower than the inline deadline land here.
	var mu sync.Mutex
	var posted []string
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posted = append(posted, string(b))
		mu.Unlock()
	}))
	defer hooks.Close()

	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	serveLog := clitest.Background(t, nil, "serve", "--listen", addr, "--fleet", fleetPath, "--interval", "500ms", "--auth-tokens", tokens,
		"--slack-signing-secret-file", secretPath, "--slack-response-url-prefix", hooks.URL+"/hooks/", "--log-level", "warn")
	clitest.WaitFor(t, "serve", 30*time.Second, func() bool { return clitest.AuthPost(t, base+"/grpc.health.v1.Health/Check", "") == http.StatusOK })

	if code, body := slackPost(t, base, "", "nodes", hooks.URL+"/hooks/x"); code != http.StatusUnauthorized || !strings.Contains(body, "missing X-Slack-Signature") {
		t.Fatalf("unsigned: %d %q, want the command's own 401", code, body)
	}
	if code, body := slackPost(t, base, "not-the-secret", "nodes", hooks.URL+"/hooks/x"); code != http.StatusUnauthorized || !strings.Contains(body, "invalid signature") {
		t.Fatalf("wrongly signed: %d %q", code, body)
	}

	// Each attempt has its own response_url, so its own signature: the
	// same request twice would be a replay.
	attempt := 0
	var last string
	var took time.Duration
	clitest.WaitFor(t, "a signed `diagnose deepseek-v4-0` to answer decode-bound", 60*time.Second, func() bool {
		attempt++
		u := fmt.Sprintf("%s/hooks/%d", hooks.URL, attempt)
		start := time.Now()
		code, body := slackPost(t, base, secret, "diagnose deepseek-v4-0", u)
		took = time.Since(start)
		last = fmt.Sprintf("%d %s", code, body)
		if code != http.StatusOK {
			return false
		}
		if strings.Contains(body, "Working on") { // slower than the inline deadline
			clitest.WaitFor(t, "the answer at the response_url", 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(posted) > 0 })
			mu.Lock()
			body = posted[len(posted)-1]
			mu.Unlock()
		}
		var msg slack.Message
		if err := json.Unmarshal([]byte(body), &msg); err != nil || len(msg.Blocks.BlockSet) == 0 {
			return false
		}
		h, ok := msg.Blocks.BlockSet[0].(*slack.HeaderBlock)
		return ok && strings.Contains(h.Text.Text, "deepseek-v4-0") && strings.Contains(h.Text.Text, "Decode-bound")
	}, &last)
	t.Logf("signed diagnose answered in %v (attempt %d)", took, attempt)

	// The same signed request again is a replay.
	u, at := hooks.URL+"/hooks/replay", time.Now().Unix()
	if code, body := slackPostAt(t, base, secret, "nodes", u, at); code != http.StatusOK || !strings.Contains(body, "deepseek-v4-0") {
		t.Fatalf("nodes: %d %s", code, body)
	}
	if code, body := slackPostAt(t, base, secret, "nodes", u, at); code != http.StatusUnauthorized || !strings.Contains(body, "replayed") {
		t.Fatalf("replay: %d %q", code, body)
	}
	if strings.Contains(serveLog.String(), secret) {
		t.Errorf("serve's log shows the signing secret")
	}

	// Without the flag the path is not served.
	target := "node-under-test=http://" + testkit.ClosedAddr(t) + "/metrics"
	plain := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", plain, "--target", target, "--log-level", "warn")
	clitest.WaitFor(t, "serve without Slack", 30*time.Second, func() bool {
		return clitest.AuthPost(t, "http://"+plain+"/grpc.health.v1.Health/Check", "") == http.StatusOK
	})
	if code, _ := slackPost(t, "http://"+plain, secret, "nodes", hooks.URL+"/hooks/y"); code != http.StatusNotFound {
		t.Errorf("without --slack-signing-secret-file: %d, want 404", code)
	}
}
