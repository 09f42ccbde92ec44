package amtest

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// Defaults of Options' zero fields.
const (
	DefaultGroupWait      = time.Second
	DefaultGroupInterval  = time.Second
	DefaultRepeatInterval = time.Hour
	DefaultReadyTimeout   = 30 * time.Second
)

// Program is the Alertmanager binary Start runs: ALERTMANAGER_BIN, then
// alertmanager or prometheus-alertmanager on PATH, then Debian's
// /usr/bin/prometheus-alertmanager.
var Program = testkit.Program{
	Name:       "alertmanager",
	Env:        "ALERTMANAGER_BIN",
	Candidates: []string{"alertmanager", "prometheus-alertmanager", "/usr/bin/prometheus-alertmanager"},
	Get:        "apt-get install -y prometheus-alertmanager",
}

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
	srv                        childproc.Server
}

// Start runs an Alertmanager and returns once it is ready. Under -short it
// skips the test; it fails the test (never skips) if the binary is missing
// or Alertmanager does not become ready.
func Start(t testing.TB, opts Options) *Alertmanager {
	t.Helper()
	if opts.WebhookURL == "" {
		t.Fatalf("amtest: Options.WebhookURL is required")
	}
	if opts.GroupWait < 0 || opts.GroupInterval < 0 || opts.RepeatInterval < 0 || opts.ReadyTimeout < 0 {
		t.Fatalf("amtest: negative duration in options")
	}
	bin := testkit.Binary(t, Program)
	dir := t.TempDir()
	a := &Alertmanager{bin: bin, dir: dir, configPath: filepath.Join(dir, "alertmanager.yml"), opts: opts}
	cfg, err := a.config()
	if err != nil {
		t.Fatalf("amtest: %v", err)
	}
	if err := os.WriteFile(a.configPath, cfg, 0o600); err != nil {
		t.Fatalf("amtest: write config: %v", err)
	}
	childproc.Ports{
		Name:   "amtest: alertmanager",
		Server: &a.srv,
		Run: func(port int) error {
			a.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			return a.run()
		},
		Stop:  a.Stop,
		About: func() string { return fmt.Sprintf("%s on %s, config %s:\n%s", bin, a.addr, a.configPath, cfg) },
	}.Start(t)
	return a
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
	cmd := exec.Command(a.bin,
		"--config.file="+a.configPath,
		"--storage.path="+filepath.Join(a.dir, "data"),
		"--web.listen-address="+a.addr,
		"--cluster.listen-address=", // no gossip: one instance, no port of its own
		"--log.level=warn",
	)
	cmd.Dir = a.dir
	proc, err := a.srv.Launch(cmd)
	if err != nil {
		return err
	}
	return childproc.Ready{
		Name: "alertmanager", Addr: a.addr, Timeout: cmp.Or(a.opts.ReadyTimeout, DefaultReadyTimeout),
		Check: childproc.HTTPReady(&http.Client{Transport: &http.Transport{Proxy: nil}}, a.URL()+"/-/ready"),
	}.Wait(proc)
}

// Stop stops Alertmanager by its pid (SIGTERM, SIGKILL after 10 s); it is
// idempotent.
func (a *Alertmanager) Stop() { a.srv.Stop(syscall.SIGTERM) }

// URL is http://127.0.0.1:port.
func (a *Alertmanager) URL() string { return "http://" + a.addr }

// Addr is the host:port Alertmanager listens on.
func (a *Alertmanager) Addr() string { return a.addr }

// Output is the tail of Alertmanager's output.
func (a *Alertmanager) Output() string { return a.srv.Logs.String() }
