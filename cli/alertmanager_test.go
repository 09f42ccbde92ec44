package cli_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeAlertmanagerSinkFlags: without a sink /alertmanager answers 404
// saying how to add one; a sink file that is empty or holds no URL stops
// serve with a usage error that does not quote the file's content.
func TestServeAlertmanagerSinkFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	target := "a=http://" + testkit.ClosedAddr(t) + "/metrics"
	for _, tc := range []struct {
		name, flag, content, want string
	}{
		{"empty", "--alert-json-webhook-file", "\n", "is empty"},
		{"not a URL", "--alert-slack-webhook-file", "hooks.example/services/s3cr3t", "not an http(s) URL"},
		{"unknown text format", "--alert-text-webhook-file", "https://open.feishu.example/hook/s3cr3t", "text format"},
		{"bad runbook base URL", "--alert-runbook-base-url", "", "--alert-runbook-base-url: want an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arg := write(tc.name, tc.content)
			if tc.flag == "--alert-runbook-base-url" {
				arg = "ftp://llmdiag.example"
			}
			_, _, err := clitest.Run(t, nil, "serve", "--listen", testkit.FreeAddr(t), "--target", target, tc.flag, arg, "--alert-text-format", "telegram")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("err %v, want one saying %q without the URL", err, tc.want)
			}
		})
	}

	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--target", target, "--log-level", "warn")
	var body string
	clitest.WaitFor(t, "/alertmanager answering 404", 30*time.Second, func() bool {
		resp, err := http.Post("http://"+addr+"/alertmanager", "application/json", strings.NewReader(`{"version":"4"}`))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusNotFound && strings.Contains(body, "--alert-slack-webhook-file")
	}, &body)
}
