package promtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// Defaults applied by Start to zero Options fields and by the waits to
// contexts without a deadline.
const (
	DefaultJob            = "llmdiag"
	DefaultScrapeInterval = time.Second
	DefaultRetention      = 2 * time.Hour
	DefaultReadyTimeout   = 30 * time.Second
	// DefaultWaitTimeout bounds WaitForSamples and WaitForScrapes when ctx
	// has no deadline.
	DefaultWaitTimeout = 60 * time.Second
	// DefaultQueryTimeout bounds Query when ctx has no deadline.
	DefaultQueryTimeout = 15 * time.Second

	// pollInterval paces the readiness and sample waits.
	pollInterval = 100 * time.Millisecond
)

// Program is the prometheus binary Start runs: PROMETHEUS_BIN, then
// prometheus on PATH, then /usr/bin/prometheus.
var Program = testkit.Program{
	Name:       "prometheus",
	Env:        "PROMETHEUS_BIN",
	Candidates: []string{"prometheus", "/usr/bin/prometheus"},
	Get:        "apt-get install -y prometheus",
}

// Options configures the Prometheus Start runs.
type Options struct {
	// Targets are the host:port pairs the job scrapes at /metrics; each
	// one's instance label is the host:port. Hosts must be loopback
	// (127.0.0.0/8, ::1 or localhost).
	Targets []string
	// TargetLabels adds target labels per target, e.g.
	// {"127.0.0.1:9100": {"node": "deepseek-v4-0"}}. Keys must be in Targets.
	TargetLabels map[string]map[string]string
	// ScrapeInterval is the global scrape and evaluation interval; 0 means
	// DefaultScrapeInterval. The scrape timeout is the interval, at most 10s.
	ScrapeInterval time.Duration
	// Job is the job_name of the targets' scrape config; "" means
	// DefaultJob.
	Job string
	// ExtraScrapeConfigs is a YAML sequence of further scrape_config
	// entries, appended to scrape_configs verbatim.
	ExtraScrapeConfigs string
	// Retention is --storage.tsdb.retention.time; 0 means DefaultRetention.
	Retention time.Duration
	// ReadyTimeout bounds the wait for /-/ready on every (re)start; 0 means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// ExtraFlags are appended to the command line.
	ExtraFlags []string
	// RuleFiles are rule files (paths) Prometheus evaluates every
	// ScrapeInterval (the evaluation interval).
	RuleFiles []string
	// Alertmanagers are the host:port pairs Prometheus sends its alerts
	// to (alerting.alertmanagers, static targets over http).
	Alertmanagers []string
	// Binary is the prometheus binary to run, as KubernetesSD returns it;
	// "" means Program's.
	Binary string
}

// Prometheus is a Prometheus server started by Start. Its methods are safe
// for concurrent use.
type Prometheus struct {
	bin        string
	dir        string // the test's temporary directory
	configPath string
	dataDir    string
	addr       string // 127.0.0.1:port, fixed for the life of the test
	job        string
	targets    []string
	opts       Options
	httpc      *http.Client
	api        v1.API
	srv        childproc.Server
}

// Start runs a Prometheus scraping opts.Targets and returns once it is
// ready. Under -short it skips the test; it fails the test (never skips)
// if the binary is missing, the options are invalid or Prometheus does not
// become ready in time. The server is stopped when the test ends, and its
// output logged if the test failed.
func Start(t testing.TB, opts Options) *Prometheus {
	t.Helper()
	if err := validate(opts); err != nil {
		t.Fatalf("promtest: %v", err)
	}
	bin := opts.Binary
	if bin == "" {
		bin = testkit.Binary(t, Program)
	}
	dir := t.TempDir() // registered before our cleanup, so removed after Stop
	p := &Prometheus{
		bin:        bin,
		dir:        dir,
		configPath: filepath.Join(dir, "prometheus.yml"),
		dataDir:    filepath.Join(dir, "data"),
		job:        cmp.Or(opts.Job, DefaultJob),
		targets:    append([]string(nil), opts.Targets...),
		opts:       opts,
		// Loopback only: no proxy from the environment, short timeouts.
		httpc: &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 4}},
	}
	cfg, err := p.config()
	if err != nil {
		t.Fatalf("promtest: %v", err)
	}
	if err := os.WriteFile(p.configPath, cfg, 0o644); err != nil {
		t.Fatalf("promtest: write config: %v", err)
	}
	childproc.Ports{
		Name:   "promtest: prometheus",
		Server: &p.srv,
		Run: func(port int) error {
			p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			p.api = v1.NewAPI(mustClient(p))
			return p.run()
		},
		Stop:  p.Stop,
		About: func() string { return fmt.Sprintf("%s on %s, config %s:\n%s", bin, p.addr, p.configPath, cfg) },
	}.Start(t)
	return p
}

func mustClient(p *Prometheus) api.Client {
	c, err := api.NewClient(api.Config{Address: p.URL(), Client: p.httpc})
	if err != nil {
		panic(fmt.Sprintf("promtest: api client for %s: %v", p.URL(), err)) // the address is ours and valid
	}
	return c
}

func validate(o Options) error {
	if len(o.Targets) == 0 && strings.TrimSpace(o.ExtraScrapeConfigs) == "" {
		return errors.New("no targets")
	}
	if o.ScrapeInterval < 0 || o.Retention < 0 || o.ReadyTimeout < 0 {
		return errors.New("negative duration in options")
	}
	seen := make(map[string]bool, len(o.Targets))
	for _, tg := range o.Targets {
		host, port, err := net.SplitHostPort(tg)
		if err != nil {
			return fmt.Errorf("target %q: %w", tg, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("target %q: bad port", tg)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("target %q: not a loopback address", tg)
		}
		if seen[tg] {
			return fmt.Errorf("target %q listed twice", tg)
		}
		seen[tg] = true
	}
	for tg, ls := range o.TargetLabels {
		if !seen[tg] {
			return fmt.Errorf("target labels for %q, which is not a target", tg)
		}
		for name := range ls {
			if !model.LegacyValidation.IsValidLabelName(name) || strings.HasPrefix(name, "__") {
				return fmt.Errorf("target %q: invalid target label name %q", tg, name)
			}
		}
	}
	return nil
}

// config renders prometheus.yml.
func (p *Prometheus) config() ([]byte, error) {
	interval := cmp.Or(p.opts.ScrapeInterval, DefaultScrapeInterval)
	timeout := min(interval, 10*time.Second)
	var statics []map[string]any
	for _, tg := range p.targets {
		sc := map[string]any{"targets": []string{tg}}
		if ls := p.opts.TargetLabels[tg]; len(ls) > 0 {
			sc["labels"] = ls
		}
		statics = append(statics, sc)
	}
	scrapes := []any{}
	if len(statics) > 0 {
		scrapes = append(scrapes, map[string]any{
			"job_name":       p.job,
			"metrics_path":   "/metrics",
			"scheme":         "http",
			"honor_labels":   false,
			"static_configs": statics,
		})
	}
	if s := strings.TrimSpace(p.opts.ExtraScrapeConfigs); s != "" {
		var extra []any
		if err := yaml.Unmarshal([]byte(s), &extra); err != nil {
			return nil, fmt.Errorf("extra scrape configs: want a YAML sequence: %w", err)
		}
		scrapes = append(scrapes, extra...)
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     model.Duration(interval).String(),
			"scrape_timeout":      model.Duration(timeout).String(),
			"evaluation_interval": model.Duration(interval).String(),
		},
		"scrape_configs": scrapes,
	}
	if len(p.opts.RuleFiles) > 0 {
		cfg["rule_files"] = p.opts.RuleFiles
	}
	if len(p.opts.Alertmanagers) > 0 {
		cfg["alerting"] = map[string]any{"alertmanagers": []any{map[string]any{
			"static_configs": []any{map[string]any{"targets": p.opts.Alertmanagers}},
		}}}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render config: %w", err)
	}
	return out, nil
}

// run launches the binary and waits for readiness.
func (p *Prometheus) run() error {
	args := []string{
		"--config.file=" + p.configPath,
		"--storage.tsdb.path=" + p.dataDir,
		"--storage.tsdb.retention.time=" + model.Duration(cmp.Or(p.opts.Retention, DefaultRetention)).String(),
		"--web.listen-address=" + p.addr,
		"--log.level=warn",
	}
	cmd := exec.Command(p.bin, append(args, p.opts.ExtraFlags...)...)
	cmd.Dir = p.dir
	proc, err := p.srv.Launch(cmd)
	if err != nil {
		return err
	}
	return childproc.Ready{
		Name: "prometheus", Addr: p.addr, Timeout: cmp.Or(p.opts.ReadyTimeout, DefaultReadyTimeout), Every: pollInterval,
		Check: childproc.HTTPReady(p.httpc, p.URL()+"/-/ready"),
	}.Wait(proc)
}

// Stop stops Prometheus: SIGTERM to its pid, SIGKILL if it has not exited
// within 10 s, then reaps it. It is idempotent, and a stopped Prometheus
// can be brought back with Restart.
func (p *Prometheus) Stop() { p.srv.Stop(syscall.SIGTERM) }

// Restart stops Prometheus (if running) and starts it again on the same
// address, configuration and data directory, waiting until it is ready;
// the TSDB keeps what was scraped before. It fails the test if Prometheus
// does not come back.
func (p *Prometheus) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.run(); err != nil {
		p.Stop()
		t.Fatalf("promtest: restart prometheus on %s: %v (prometheus output is logged at the end)", p.addr, err)
	}
}

// Running reports whether the process is running.
func (p *Prometheus) Running() bool { return p.srv.Running() }

// Pid is the process id of the running Prometheus, 0 while stopped: for a
// test that signals it (SIGSTOP and SIGCONT to pause it).
func (p *Prometheus) Pid() int {
	if proc := p.srv.Proc(); proc != nil {
		return proc.Pid()
	}
	return 0
}

// URL is the base URL of the HTTP API, http://127.0.0.1:port.
func (p *Prometheus) URL() string { return "http://" + p.addr }

// Addr is the host:port Prometheus listens on.
func (p *Prometheus) Addr() string { return p.addr }

// Job is the job_name of the targets' scrape config.
func (p *Prometheus) Job() string { return p.job }

// Targets are the scraped host:port pairs (the instance label values).
func (p *Prometheus) Targets() []string { return append([]string(nil), p.targets...) }

// ConfigFile is the path of the prometheus.yml Start wrote.
func (p *Prometheus) ConfigFile() string { return p.configPath }

// DataDir is the TSDB directory.
func (p *Prometheus) DataDir() string { return p.dataDir }

// Output is the tail of what Prometheus has written to stdout and stderr.
func (p *Prometheus) Output() string { return p.srv.Logs.String() }

// API is a client_golang v1 API client for this server, for calls Query
// does not cover (and for its warnings).
func (p *Prometheus) API() v1.API { return p.api }

// Query evaluates q as an instant query at time at. When ctx has no
// deadline, DefaultQueryTimeout applies. Warnings are dropped; use API for
// them.
func (p *Prometheus) Query(ctx context.Context, q string, at time.Time) (model.Value, error) {
	ctx, cancel := withDefaultTimeout(ctx, DefaultQueryTimeout)
	defer cancel()
	v, _, _, err := p.api.Query(ctx, q, at)
	if err != nil {
		return nil, fmt.Errorf("promtest: query %q at %s: %w", q, at.Format(time.RFC3339Nano), err)
	}
	return v, nil
}

// QueryVector is Query for expressions that return an instant vector.
func (p *Prometheus) QueryVector(ctx context.Context, q string, at time.Time) (model.Vector, error) {
	v, err := p.Query(ctx, q, at)
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("promtest: query %q returned %s, want vector", q, v.Type())
	}
	return vec, nil
}

// WaitForSamples polls the instant query q (evaluated at the current time)
// until it returns at least n series with a non-NaN value, e.g.
//
//	WaitForSamples(ctx, `count(up == 1) == 5`, 1)        // five targets up
//	WaitForSamples(ctx, `count_over_time(up[15s]) >= 2`, 5) // rate over 15s works
//
// A scalar result counts as one sample, a matrix as its series. It returns
// an error when ctx ends (or, without a deadline, after
// DefaultWaitTimeout), naming the last result or error.
func (p *Prometheus) WaitForSamples(ctx context.Context, q string, n int) error {
	ctx, cancel := withDefaultTimeout(ctx, DefaultWaitTimeout)
	defer cancel()
	start := time.Now()
	var (
		got  int
		last error
	)
	for {
		v, err := p.Query(ctx, q, time.Now())
		if err == nil {
			got, last = countSamples(v), nil
			if got >= n {
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promtest: %q returned %d samples, want >= %d, after %v (%w; last error: %v)",
				q, got, n, time.Since(start).Round(time.Millisecond), ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// WaitForScrapes waits until every target of the job has been scraped
// successfully at least n times (counting from the creation of the data
// directory, within the last hour), so that a rate over a window of
// n-1 scrape intervals has n samples per series.
func (p *Prometheus) WaitForScrapes(ctx context.Context, n int) error {
	if len(p.targets) == 0 {
		return errors.New("promtest: no targets to wait for")
	}
	q := fmt.Sprintf(`sum_over_time(up{job=%q}[1h]) >= %d`, p.job, n)
	return p.WaitForSamples(ctx, q, len(p.targets))
}

func countSamples(v model.Value) int {
	switch v := v.(type) {
	case model.Vector:
		n := 0
		for _, s := range v {
			if !math.IsNaN(float64(s.Value)) {
				n++
			}
		}
		return n
	case *model.Scalar:
		if !math.IsNaN(float64(v.Value)) {
			return 1
		}
	case model.Matrix:
		n := 0
		for _, s := range v {
			if len(s.Values) > 0 {
				n++
			}
		}
		return n
	}
	return 0
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
