package amtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
)

// Defaults of Options' zero fields.
const (
	DefaultGroupWait      = time.Second
	DefaultGroupInterval  = time.Second
	DefaultRepeatInterval = time.Hour
	DefaultReadyTimeout   = 30 * time.Second

	stopTimeout   = 10 * time.Second
	startAttempts = 3
	pollInterval  = 100 * time.Millisecond
)

// InstallHint says how to get the binary Start needs.
const InstallHint = "install Debian's package: apt-get install -y prometheus-alertmanager " +
	"(or run `make deps`, which runs scripts/deps.sh), or set ALERTMANAGER_BIN to an alertmanager binary"

// Options configure the Alertmanager Start runs.
type Options struct {
	// WebhookURL is where the one receiver posts; required.
	WebhookURL string
	// BearerToken, when set, is sent as Authorization: Bearer (from a
	// credentials file).
	BearerToken string
	// GroupBy are the route's group_by labels (default alertname,
	// instance: one notification per alert and node).
	GroupBy []string
	// GroupWait, GroupInterval and RepeatInterval are the route's; zero
	// means the defaults above.
	GroupWait, GroupInterval, RepeatInterval time.Duration
	// ReadyTimeout bounds the wait for /-/ready.
	ReadyTimeout time.Duration
}

// Alertmanager is an Alertmanager started by Start.
type Alertmanager struct {
	bin, dir, configPath, addr string
	opts                       Options
	logs                       *childproc.LogTail

	mu   sync.Mutex
	proc *childproc.Proc
}

// Binary locates the Alertmanager binary; the error says how to install it.
func Binary() (string, error) {
	if p := os.Getenv("ALERTMANAGER_BIN"); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("amtest: ALERTMANAGER_BIN=%q is not an executable file; %s", p, InstallHint)
	}
	for _, name := range []string{"alertmanager", "prometheus-alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	if p := "/usr/bin/prometheus-alertmanager"; isExecutable(p) {
		return p, nil
	}
	return "", fmt.Errorf("amtest: alertmanager binary not found on PATH or at /usr/bin/prometheus-alertmanager; %s", InstallHint)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Start runs an Alertmanager and returns once it is ready. It fails the
// test (never skips) if the binary is missing or it does not become ready.
func Start(t testing.TB, opts Options) *Alertmanager {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if opts.WebhookURL == "" {
		t.Fatalf("amtest: Options.WebhookURL is required")
	}
	if opts.GroupWait < 0 || opts.GroupInterval < 0 || opts.RepeatInterval < 0 || opts.ReadyTimeout < 0 {
		t.Fatalf("amtest: negative duration in options")
	}
	dir := t.TempDir()
	a := &Alertmanager{bin: bin, dir: dir, configPath: filepath.Join(dir, "alertmanager.yml"), opts: opts, logs: &childproc.LogTail{}}
	cfg, err := a.config()
	if err != nil {
		t.Fatalf("amtest: %v", err)
	}
	if err := os.WriteFile(a.configPath, cfg, 0o600); err != nil {
		t.Fatalf("amtest: write config: %v", err)
	}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("amtest: alertmanager on %s, config %s:\n%s\n--- alertmanager output ---\n%s", a.addr, a.configPath, cfg, a.logs)
		}
	})
	var lastErr error
	for range startAttempts {
		port, err := childproc.FreePort()
		if err != nil {
			t.Fatalf("amtest: %v", err)
		}
		a.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		mark := a.logs.Len()
		if lastErr = a.run(); lastErr == nil {
			return a
		}
		a.Stop()
		if !a.logs.ContainsSince(mark, "address already in use") {
			break
		}
	}
	t.Fatalf("amtest: start %s: %v (alertmanager output is logged below)", bin, lastErr)
	return nil
}

// config renders alertmanager.yml (and the credentials file).
func (a *Alertmanager) config() ([]byte, error) {
	hook := map[string]any{"url": a.opts.WebhookURL, "send_resolved": true}
	if a.opts.BearerToken != "" {
		cred := filepath.Join(a.dir, "token")
		if err := os.WriteFile(cred, []byte(a.opts.BearerToken), 0o600); err != nil {
			return nil, fmt.Errorf("write credentials: %w", err)
		}
		hook["http_config"] = map[string]any{"authorization": map[string]any{"type": "Bearer", "credentials_file": cred}}
	}
	groupBy := a.opts.GroupBy
	if len(groupBy) == 0 {
		groupBy = []string{"alertname", "instance"}
	}
	return yaml.Marshal(map[string]any{
		"route": map[string]any{
			"receiver":        "llmdiag",
			"group_by":        groupBy,
			"group_wait":      model.Duration(cmp.Or(a.opts.GroupWait, DefaultGroupWait)).String(),
			"group_interval":  model.Duration(cmp.Or(a.opts.GroupInterval, DefaultGroupInterval)).String(),
			"repeat_interval": model.Duration(cmp.Or(a.opts.RepeatInterval, DefaultRepeatInterval)).String(),
		},
		"receivers": []any{map[string]any{"name": "llmdiag", "webhook_configs": []any{hook}}},
	})
}

func (a *Alertmanager) run() error {
	a.mu.Lock()
	if a.proc != nil {
		a.mu.Unlock()
		return errors.New("already running")
	}
	cmd := exec.Command(a.bin,
		"--config.file="+a.configPath,
		"--storage.path="+filepath.Join(a.dir, "data"),
		"--web.listen-address="+a.addr,
		"--cluster.listen-address=", // no gossip: one instance, no port of its own
		"--log.level=warn",
	)
	cmd.Dir = a.dir
	cmd.Stdout, cmd.Stderr = a.logs, a.logs
	cmd.WaitDelay = 5 * time.Second
	proc, err := childproc.Start(cmd)
	if err != nil {
		a.mu.Unlock()
		return fmt.Errorf("exec %s: %w", a.bin, err)
	}
	a.proc = proc
	a.mu.Unlock()

	timeout := cmp.Or(a.opts.ReadyTimeout, DefaultReadyTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	var last error
	for {
		last = ready(ctx, client, a.URL()+"/-/ready")
		if last == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("alertmanager exited before it was ready: %v", proc.Err())
		case <-ctx.Done():
			return fmt.Errorf("alertmanager not ready on %s after %v: %v", a.addr, timeout, last)
		case <-time.After(pollInterval):
		}
	}
}

func ready(ctx context.Context, c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready: %s", resp.Status)
	}
	return nil
}

// Stop stops Alertmanager by its pid (SIGTERM, SIGKILL after 10 s); it is
// idempotent.
func (a *Alertmanager) Stop() {
	a.mu.Lock()
	proc := a.proc
	a.proc = nil
	a.mu.Unlock()
	if proc != nil {
		proc.Stop(syscall.SIGTERM, stopTimeout)
	}
}

// URL is http://127.0.0.1:port.
func (a *Alertmanager) URL() string { return "http://" + a.addr }

// Addr is the host:port Alertmanager listens on.
func (a *Alertmanager) Addr() string { return a.addr }

// Output is the tail of Alertmanager's output.
func (a *Alertmanager) Output() string { return a.logs.String() }
