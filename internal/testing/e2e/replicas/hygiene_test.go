package replicas_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// The secrets TestNoPasswordLeaks gives in URLs, and the content of a page
// only a redirect leads to.
const (
	targetPassword   = "tgt-pw-3141"
	promPassword     = "prom-pw-2718"
	redisPassword    = "redis-pw-1618"
	redirectedMarker = "INTERNAL-PAGE-5772"
)

// TestNoPasswordLeaks runs serve with a password in every URL it takes: the
// fleet's targets (one answering, one refusing connections, one
// redirecting elsewhere), --prometheus and --redis, plus a second replica
// given the Redis password in --redis-password-file. Each URL's password
// is used (the target and Prometheus get basic authentication, Redis
// accepts it), and no log line (at debug level), no answer of ListNodes,
// GetNodeMetrics, DiagnoseNode or StreamHealth, and nothing on /metrics
// carries any of them, nor the content of the page the redirect leads to
// (which is never asked for).
func TestNoPasswordLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve with real Redis and two replicas")
	}
	dir := t.TempDir()
	exposition, err := os.ReadFile(clitest.RepoPath(t, "engine", "testdata", "vllm-v1-dynamo-metrics_examples.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		auths     = map[string]string{} // who got which Authorization
		redirects int
	)
	record := func(who string, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auths[who] = r.Header.Get("Authorization")
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("target", r)
		if u, p, ok := r.BasicAuth(); !ok || u != "scraper" || p != targetPassword {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(exposition)
	}))
	defer target.Close()
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("internal", r)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, redirectedMarker+"\n")
	}))
	defer internal.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		redirects++
		mu.Unlock()
		http.Redirect(w, r, internal.URL+"/admin", http.StatusFound)
	}))
	defer redirector.Close()
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("prometheus", r)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/targets") {
			io.WriteString(w, `{"status":"success","data":{"activeTargets":[],"droppedTargets":[]}}`)
			return
		}
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer prom.Close()
	rs := redistest.Start(t)
	if _, err := rs.Do("CONFIG", "SET", "requirepass", redisPassword); err != nil {
		t.Fatal(err)
	}

	withUser := func(u, user, pw string) string { return strings.Replace(u, "://", "://"+user+":"+pw+"@", 1) }
	fleetFile := filepath.Join(dir, "fleet.yaml")
	fleetYAML := "nodes:\n" +
		"  - id: secured\n    url: " + withUser(target.URL, "scraper", targetPassword) + "/metrics\n    engine: vllm\n" +
		"  - id: gone\n    url: " + withUser("http://"+testkit.ClosedAddr(t), "scraper", targetPassword) + "/metrics\n    engine: vllm\n" +
		"  - id: redirecting\n    url: " + withUser(redirector.URL, "scraper", targetPassword) + "/metrics\n    engine: vllm\n"
	if err := os.WriteFile(fleetFile, []byte(fleetYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "redis-password")
	if err := os.WriteFile(pwFile, []byte(redisPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"serve", "--fleet", fleetFile, "--interval", "500ms", "--scrape-timeout", "400ms", "--stale-after", "5s",
		"--prometheus", withUser(prom.URL, "llmdiag", promPassword), "--log-level", "debug", "--log-format", "json"}
	addr1, addr2 := testkit.FreeAddr(t), testkit.FreeAddr(t)
	log1 := clitest.Background(t, nil, append(common, "--listen", addr1, "--replica-id", "r1",
		"--redis", "redis://default:"+redisPassword+"@"+rs.Addr())...)
	log2 := clitest.Background(t, nil, append(common, "--listen", addr2, "--replica-id", "r2",
		"--redis", "redis://default@"+rs.Addr(), "--redis-password-file", pwFile)...)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var answers strings.Builder
	add := func(what string, m proto.Message) {
		b, _ := protojson.Marshal(m)
		answers.WriteString(what + ": " + string(b) + "\n")
	}
	for _, addr := range []string{addr1, addr2} {
		c, err := client.New("http://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		// Every node listed, the redirecting one down with the redirect named.
		var nodes *llmdiagv1.ListNodesResponse
		var last string
		clitest.WaitFor(t, "three nodes listed by "+addr, 30*time.Second, func() bool {
			res, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
			if err != nil {
				last = err.Error()
				return false
			}
			nodes = res.Msg
			b, _ := protojson.Marshal(nodes)
			last = string(b)
			return len(nodes.GetNodes()) == 3
		}, &last)
		add("ListNodes", nodes)
		for _, id := range []string{"secured", "gone", "redirecting"} {
			var m *llmdiagv1.GetNodeMetricsResponse
			clitest.WaitFor(t, id+"'s metrics from "+addr, 30*time.Second, func() bool {
				res, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: id}))
				if err != nil {
					last = err.Error()
					return false
				}
				m = res.Msg
				b, _ := protojson.Marshal(m)
				last = string(b)
				// The scraped nodes' errors say what happened.
				errs := strings.Join(m.GetMetrics().GetErrors(), "; ")
				switch id {
				case "secured":
					return m.GetMetrics().GetUp()
				case "redirecting":
					return strings.Contains(errs, "HTTP 302 Found to "+internal.URL+"/admin, not followed")
				default:
					return strings.Contains(errs, "scrape http://scraper:xxxxx@")
				}
			}, &last)
			add("GetNodeMetrics "+id, m)
			d, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: id}))
			if err != nil {
				t.Fatalf("DiagnoseNode %s: %v", id, err)
			}
			add("DiagnoseNode "+id, d.Msg)
		}
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := c.StreamHealth(sctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(5 * time.Second)}))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if !st.Receive() {
				t.Fatalf("StreamHealth: %v", st.Err())
			}
			add("StreamHealth", st.Msg())
		}
		st.Close()
		scancel()
		res, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answers.WriteString("/metrics: " + string(b) + "\n")
	}

	// Each password was used where it belongs.
	mu.Lock()
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	if auths["target"] != basic("scraper", targetPassword) || auths["prometheus"] != basic("llmdiag", promPassword) {
		t.Errorf("authorization: target got %q, prometheus %q", auths["target"], auths["prometheus"])
	}
	if _, asked := auths["internal"]; asked || redirects == 0 {
		t.Errorf("the redirect was followed (internal page asked %v) or never answered (%d redirects)", asked, redirects)
	}
	mu.Unlock()

	logs := log1.String() + log2.String()
	if !strings.Contains(logs, "scrape failed") || !strings.Contains(logs, `"redis":"redis://default:xxxxx@`) {
		t.Errorf("the logs lack the scrape failures or the redacted --redis:\n%s", logs)
	}
	for _, secret := range []string{targetPassword, promPassword, redisPassword, redirectedMarker} {
		if i := strings.Index(logs, secret); i >= 0 {
			t.Errorf("the log carries %q: …%s…", secret, logs[max(0, i-300):min(len(logs), i+100)])
		}
		if a := answers.String(); strings.Contains(a, secret) {
			i := strings.Index(a, secret)
			t.Errorf("an answer carries %q: …%s…", secret, a[max(0, i-300):min(len(a), i+100)])
		}
	}
	if !strings.Contains(answers.String(), `"url":"http://scraper:xxxxx@`) {
		t.Errorf("ListNodes lacks the redacted urls:\n%s", answers.String())
	}
}
