package promstack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	"google.golang.org/protobuf/encoding/protojson"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/amtest"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// received is one body a sink got, and when.
type received struct {
	path string
	body []byte
	at   time.Time
}

// sinkRecorder plays the Slack and JSON webhooks.
type sinkRecorder struct {
	mu  sync.Mutex
	got []received
}

func (s *sinkRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	s.got = append(s.got, received{path: r.URL.Path, body: b, at: time.Now()})
	s.mu.Unlock()
}

func (s *sinkRecorder) all() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// genericMessage is what the JSON sink gets (alerts.RenderJSON).
type genericMessage struct {
	Alert      template.Alert  `json:"alert"`
	Node       string          `json:"node"`
	Note       string          `json:"note"`
	RunbookURL string          `json:"runbookURL"`
	Diagnosis  json.RawMessage `json:"diagnosis"`
}

// TestAlertmanagerEndToEnd runs a real Alertmanager end to end: the
// simulator's overloaded scenario; llmdiag serving it (direct
// scrape) with authentication on and the Alertmanager receiver forwarding
// to a Slack and a JSON sink; a real Prometheus scraping the same nodes and
// evaluating `llmdiag rules` every second, alerting to a real Alertmanager
// that posts to llmdiag's /alertmanager with the alertmanager role's
// token. The sinks must get LLMDiagOverloaded on glm-4.6-0 (matched by its
// instance, the host:port of its metrics URL) with the OVERLOADED verdict
// and its evidence, in time.
func TestAlertmanagerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real Prometheus and Alertmanager end to end")
	}
	dir := t.TempDir()
	simFleet := filepath.Join(dir, "sim.yaml")
	f := clitest.Sim(t, "overloaded", simFleet)

	sinks := &sinkRecorder{}
	sinkSrv := httptest.NewServer(sinks)
	defer sinkSrv.Close()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const (
		readerToken = "rdr-e2e-0123456789abcdef0123456789ab"
		amToken     = "am-e2e-0123456789abcdef0123456789abcd"
	)
	tokens := write("tokens.yaml", "tokens:\n  - {name: oncall, role: reader, token: \""+readerToken+"\"}\n"+
		"  - {name: alertmanager, role: alertmanager, token: \""+amToken+"\"}\n")
	addr := testkit.FreeAddr(t)
	vars := map[string]string{"LLMDIAG_ADDR": "http://" + addr, "LLMDIAG_TOKEN": readerToken}
	serveLog := clitest.Background(t, vars, "serve", "--listen", addr, "--fleet", simFleet, "--interval", "1s", "--auth-tokens", tokens,
		"--alert-slack-webhook-file", write("slack-url", sinkSrv.URL+"/services/T0/B0/secret\n"),
		"--alert-json-webhook-file", write("json-url", sinkSrv.URL+"/generic"),
		"--alert-runbook-base-url", "http://"+addr,
		"--log-level", "info")

	// llmdiag reads glm-4.6-0 OVERLOADED before Prometheus starts, so that
	// the alert meets a settled verdict (it takes OverloadedAfter, 30 s, of
	// llmdiag's own history).
	var diag string
	clitest.WaitFor(t, "glm-4.6-0 diagnosed OVERLOADED", 120*time.Second, func() bool {
		o, _, err := clitest.Run(t, vars, "diagnose", "glm-4.6-0", "--format", "json")
		diag = o
		resp := &llmdiagv1.DiagnoseNodeResponse{}
		return err == nil && protojson.Unmarshal([]byte(o), resp) == nil && resp.GetDiagnosis().GetRootCause() == llmdiagv1.Cause_CAUSE_OVERLOADED
	}, &diag)

	// Alertmanager without the token is refused by llmdiag's auth; with it
	// the receiver answers.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/alertmanager", strings.NewReader(`{"version":"4"}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /alertmanager without a token: %v %v, want 401", resp, err)
	}

	rules, _, err := clitest.Run(t, nil, "rules", "--runbook-base-url", "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	const (
		evalInterval = time.Second // promtest: scrape interval = evaluation interval
		groupWait    = time.Second
	)
	am := amtest.Start(t, amtest.Options{WebhookURL: "http://" + addr + "/alertmanager", BearerToken: amToken, GroupWait: groupWait, GroupInterval: time.Second})
	var targets []string
	instanceOf := map[string]string{}
	for _, n := range f.Nodes {
		u, _ := url.Parse(n.URL)
		targets = append(targets, u.Host)
		instanceOf[n.ID] = u.Host
	}
	promtest.Start(t, promtest.Options{Targets: targets, ScrapeInterval: evalInterval,
		RuleFiles: []string{write("llmdiag-rules.yaml", rules)}, Alertmanagers: []string{am.Addr()}})

	// The alert fires at the evaluation that first sees the node queueing
	// (its startsAt); Prometheus sends it to Alertmanager at the end of
	// that evaluation, Alertmanager holds a new group for group_wait, and
	// llmdiag answers at once and diagnoses and forwards within a
	// DiagnoseNode call and a POST. So: alert fired → enriched message
	// within 2 × evaluation interval + group_wait + 10 s for a busy
	// 2-core machine (Alertmanager's dispatch tick, llmdiag's queue, the
	// scheduler).
	bound := 2*evalInterval + groupWait + 10*time.Second
	var overload *genericMessage
	var at time.Time
	var last string
	clitest.WaitFor(t, "LLMDiagOverloaded on glm-4.6-0 at the JSON sink", 120*time.Second, func() bool {
		for _, r := range sinks.all() {
			if r.path != "/generic" {
				continue
			}
			var m genericMessage
			if json.Unmarshal(r.body, &m) != nil {
				continue
			}
			last = string(r.body)
			if m.Alert.Labels["alertname"] == "LLMDiagOverloaded" && m.Alert.Status == "firing" {
				overload, at = &m, r.at
				return true
			}
		}
		return false
	}, &last)

	if overload.Node != "glm-4.6-0" || overload.Alert.Labels["instance"] != instanceOf["glm-4.6-0"] {
		t.Errorf("alert matched to node %q (instance %s), want glm-4.6-0 (%s)", overload.Node, overload.Alert.Labels["instance"], instanceOf["glm-4.6-0"])
	}
	d := &llmdiagv1.Diagnosis{}
	if err := protojson.Unmarshal(overload.Diagnosis, d); err != nil {
		t.Fatalf("diagnosis: %v\n%s", err, overload.Diagnosis)
	}
	if d.GetRootCause() != llmdiagv1.Cause_CAUSE_OVERLOADED || len(d.GetEvidence()) == 0 {
		t.Errorf("verdict %v with %d evidence lines, want OVERLOADED with evidence: %s", d.GetRootCause(), len(d.GetEvidence()), overload.Diagnosis)
	}
	// The verdict's runbook, and the alert's own (from the rules), which
	// llmdiag serves.
	if want := "http://" + addr + "/runbooks/overloaded"; overload.RunbookURL != want || overload.Alert.Annotations["runbook_url"] != want {
		t.Errorf("runbook links: verdict %q, alert %q; want both %q", overload.RunbookURL, overload.Alert.Annotations["runbook_url"], want)
	}
	latency := at.Sub(overload.Alert.StartsAt)
	t.Logf("alert fired (startsAt %s) → enriched message received: %v (bound %v)", overload.Alert.StartsAt.Format(time.RFC3339Nano), latency.Round(time.Millisecond), bound)
	if latency > bound {
		t.Errorf("enriched message %v after the alert fired, want within %v", latency, bound)
	}

	// The Slack sink got the same, in Block Kit.
	clitest.WaitFor(t, "the Slack message", 30*time.Second, func() bool {
		for _, r := range sinks.all() {
			s := string(r.body)
			if r.path == "/services/T0/B0/secret" && strings.Contains(s, `"type":"header"`) &&
				strings.Contains(s, "FIRING LLMDiagOverloaded on glm-4.6-0") && strings.Contains(s, "OVERLOADED") &&
				strings.Contains(s, "*Evidence*") && strings.Contains(s, d.GetEvidence()[0][:20]) {
				return true
			}
		}
		return false
	})

	if l := serveLog.String(); !strings.Contains(l, `sinks=slack,json`) || strings.Contains(l, "/services/T0") || strings.Contains(l, "/generic") {
		t.Errorf("serve's log should name the sinks and never their URLs:\n%s", l)
	}

	// Every alert of this run, to report the spread.
	var lat []time.Duration
	for _, r := range sinks.all() {
		var m genericMessage
		if r.path == "/generic" && json.Unmarshal(r.body, &m) == nil && m.Alert.Status == "firing" {
			lat = append(lat, r.at.Sub(m.Alert.StartsAt))
		}
	}
	slices.Sort(lat)
	t.Logf("alert fired → enriched message over %d alerts: min %v, median %v, max %v", len(lat),
		lat[0].Round(time.Millisecond), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
