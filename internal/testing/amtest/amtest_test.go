package amtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestAlertmanagerPostsToTheWebhook posts an alert to a real Alertmanager's
// API and waits for its webhook, with the bearer token, at the receiver.
func TestAlertmanagerPostsToTheWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" "+string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	am := Start(t, Options{WebhookURL: hook.URL + "/alertmanager", BearerToken: "t0ken"})

	alerts, _ := json.Marshal([]map[string]any{{"labels": map[string]string{"alertname": "Test", "instance": "127.0.0.1:9"}, "startsAt": time.Now().Format(time.RFC3339)}})
	resp, err := http.Post(am.URL()+"/api/v2/alerts", "application/json", bytes.NewReader(alerts))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("post alerts: %s", resp.Status)
	}
	testkit.Eventually(t, 30*time.Second, "the webhook called with the token", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range got {
			if strings.HasPrefix(g, "Bearer t0ken {") && strings.Contains(g, `"version":"4"`) && strings.Contains(g, `"alertname":"Test"`) {
				return true
			}
		}
		return false
	})
}

func TestMissingBinaryFailsWithInstallHint(t *testing.T) {
	t.Setenv("ALERTMANAGER_BIN", t.TempDir()+"/no-such-alertmanager")
	msg := testkit.Fails(t, func(tb testing.TB) { Start(tb, Options{WebhookURL: "http://127.0.0.1:9/"}) })
	if !strings.Contains(msg, "apt-get install -y prometheus-alertmanager") {
		t.Errorf("message %q does not say how to install Alertmanager", msg)
	}
}
