package exposure_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// methodLog is a bearer transport that records the HTTP methods it sent.
type methodLog struct {
	token string
	mu    sync.Mutex
	seen  []string
}

func (m *methodLog) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+m.token)
	m.mu.Lock()
	m.seen = append(m.seen, r.Method+" "+r.URL.Path)
	m.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// rawGet is what curl does: one GET, the token in a header, the answer
// read whole (not decompressed: Accept-Encoding set by hand).
func rawGet(t *testing.T, u, token, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	resp, body, err := tryGet(u, token, acceptEncoding)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func tryGet(u, token, acceptEncoding string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// getURL is a Connect GET of procedure with msg as JSON.
func getURL(base, procedure string, msg proto.Message) string {
	b, err := protojson.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return base + "/llmdiag.v1.DiagnosisService/" + procedure + "?connect=v1&encoding=json&message=" + url.QueryEscape(string(b))
}

// TestPlainGETs runs serve as it is deployed (tokens, rate limits, the
// simulator's seed fleet) and reads it over HTTP GET: with connect-go's
// WithHTTPGet client and with raw requests as curl sends them. GET answers
// say how they may be cached; errors, refusals and POSTs do not let a
// cache keep them.
func TestPlainGETs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: GETs on the simulated seed fleet, about a minute under -race")
	}
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	clitest.Sim(t, "seed", fleetPath)
	const console, poller, burst = "console-token-0123456789abcdef", "poller-token-0123456789abcdef", "burst-token-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n"+
		"  - {name: console, role: reader, token: "+console+"}\n"+
		"  - {name: poller, role: reader, token: "+poller+"}\n"+
		"  - {name: burst, role: reader, token: "+burst+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	// A refresh a second (max-age=1); a 15s window, covered after 14s, so
	// the history's points soon carry their window's E2E P99.
	clitest.Background(t, nil, "serve", "--listen", addr, "--fleet", fleetPath, "--interval", "1s", "--window", "15s",
		"--auth-tokens", tokens, "--rate-limit", "20", "--rate-burst", "60", "--log-level", "warn")

	// The poller's own rate limit: waiting costs the console nothing.
	pollClient := llmdiagv1connect.NewDiagnosisServiceClient(&http.Client{Transport: &methodLog{token: poller}}, base, connect.WithHTTPGet())
	var last string
	clitest.WaitFor(t, "a history point of glm-4.6-0 with its window's E2E P99", 60*time.Second, func() bool {
		resp, err := pollClient.GetNodeHistory(context.Background(), connect.NewRequest(&llmdiagv1.GetNodeHistoryRequest{Node: "glm-4.6-0"}))
		if err != nil {
			last = err.Error()
			return false
		}
		last = protojson.Format(resp.Msg)
		return slices.ContainsFunc(resp.Msg.GetPoints(), func(p *llmdiagv1.HistoryPoint) bool { return p.E2EP99Seconds != nil && p.GetE2EP99Seconds() > 0 })
	}, &last)

	// The CLI's table of it.
	out, _, err := clitest.Run(t, map[string]string{"LLMDIAG_ADDR": base, "LLMDIAG_TOKEN": poller}, "history", "glm-4.6-0", "--limit", "3")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 4 || !strings.Contains(lines[0], "E2E P99") {
		t.Errorf("history --limit 3: %v\n%s", err, out)
	}

	// connect-go over GET, through auth, the limiter, the coalescer.
	tr := &methodLog{token: console}
	c := llmdiagv1connect.NewDiagnosisServiceClient(&http.Client{Transport: tr}, base, connect.WithHTTPGet())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil || len(nodes.Msg.GetNodes()) < 4 {
		t.Fatalf("ListNodes over GET: %v, %v", nodes, err)
	}
	if cc := nodes.Header().Get("Cache-Control"); cc != "private, max-age=1" {
		t.Errorf("ListNodes over GET: Cache-Control %q, want private, max-age=1", cc)
	}
	if v := nodes.Header().Values("Vary"); !slices.Contains(v, "Authorization") {
		t.Errorf("ListNodes over GET: Vary %q, want Authorization in it", v)
	}
	if _, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "deepseek-v4-0"})); err != nil {
		t.Errorf("GetNodeMetrics over GET: %v", err)
	}
	if d, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "deepseek-v4-0", Language: llmdiagv1.Language_LANGUAGE_ZH})); err != nil || d.Msg.GetReport() == "" {
		t.Errorf("DiagnoseNode over GET: %v", err)
	}
	if _, err := c.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, GroupBy: llmdiagv1.GroupBy_GROUP_BY_MODEL})); err != nil {
		t.Errorf("ComparePercentiles over GET: %v", err)
	}
	hist, err := c.GetNodeHistory(ctx, connect.NewRequest(&llmdiagv1.GetNodeHistoryRequest{Node: "glm-4.6-0", Limit: 5}))
	if err != nil || len(hist.Msg.GetPoints()) == 0 || len(hist.Msg.GetPoints()) > 5 {
		t.Fatalf("GetNodeHistory over GET: %v, %v", hist, err)
	}
	_, err = c.GetNodeHistory(ctx, connect.NewRequest(&llmdiagv1.GetNodeHistoryRequest{Node: "no-such-node"}))
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "no-such-node") {
		t.Errorf("GetNodeHistory of an unknown node over GET: %v, want not_found naming it", err)
	}
	tr.mu.Lock()
	for _, s := range tr.seen {
		if !strings.HasPrefix(s, "GET ") {
			t.Errorf("the WithHTTPGet client sent %s", s)
		}
	}
	if len(tr.seen) != 6 {
		t.Errorf("sent %d requests, want 6: %q", len(tr.seen), tr.seen)
	}
	tr.mu.Unlock()

	// As curl sends it: JSON in the query.
	u := getURL(base, "GetNodeHistory", &llmdiagv1.GetNodeHistoryRequest{Node: "glm-4.6-0", Limit: 3})
	resp, body := rawGet(t, u, console, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("raw GET: HTTP %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "private, max-age=1" {
		t.Errorf("raw GET: Cache-Control %q, want private, max-age=1", cc)
	}
	got := &llmdiagv1.GetNodeHistoryResponse{}
	if err := protojson.Unmarshal(body, got); err != nil || len(got.GetPoints()) == 0 || len(got.GetPoints()) > 3 {
		t.Fatalf("raw GET answer %s: %v", body, err)
	}
	// Absent figures are absent in the JSON, never 0.
	var raw struct {
		Points []map[string]any `json:"points"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for i, p := range got.GetPoints() {
		if _, in := raw.Points[i]["e2eP99Seconds"]; in != (p.E2EP99Seconds != nil) {
			t.Errorf("point %d: e2eP99Seconds in the JSON %v, set %v", i, in, p.E2EP99Seconds != nil)
		}
	}

	// Binary protobuf, base64 in the query.
	b, err := proto.Marshal(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-4.6-0"})
	if err != nil {
		t.Fatal(err)
	}
	resp, body = rawGet(t, base+"/llmdiag.v1.DiagnosisService/GetNodeMetrics?connect=v1&encoding=proto&base64=1&message="+base64.RawURLEncoding.EncodeToString(b), console, "")
	m := &llmdiagv1.GetNodeMetricsResponse{}
	if resp.StatusCode != http.StatusOK || proto.Unmarshal(body, m) != nil || m.GetMetrics().GetNode() != "glm-4.6-0" {
		t.Errorf("raw GET, binary: HTTP %d, %d bytes, node %q", resp.StatusCode, len(body), m.GetMetrics().GetNode())
	}

	// An error over GET: its code as Connect's JSON, and not to be kept.
	resp, body = rawGet(t, getURL(base, "GetNodeHistory", &llmdiagv1.GetNodeHistoryRequest{Node: "no-such-node"}), console, "")
	var e struct{ Code, Message string }
	if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Code != "not_found" || !strings.Contains(e.Message, "no-such-node") {
		t.Errorf("raw GET of an unknown node: HTTP %d %s, want 404 not_found naming it", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("raw GET of an unknown node: Cache-Control %q, want no-store", cc)
	}
	resp, body = rawGet(t, getURL(base, "GetNodeHistory", &llmdiagv1.GetNodeHistoryRequest{Node: "glm-4.6-0", Limit: -1}), console, "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "limit") {
		t.Errorf("raw GET, limit -1: HTTP %d %s, want 400 naming limit", resp.StatusCode, body)
	}
	// Without a token: refused before the service, as a POST would be.
	if resp, _ := rawGet(t, u, "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("raw GET without a token: HTTP %d, want 401", resp.StatusCode)
	}
	// A POST of the same read: no Cache-Control.
	req, err := http.NewRequest(http.MethodPost, base+"/llmdiag.v1.DiagnosisService/GetNodeHistory", strings.NewReader(`{"node":"glm-4.6-0","limit":3}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+console)
	if pr, err := http.DefaultClient.Do(req); err != nil || pr.StatusCode != http.StatusOK || pr.Header.Get("Cache-Control") != "" {
		t.Errorf("POST: %v, %v; want 200 without Cache-Control", pr, err)
	} else {
		pr.Body.Close()
	}

	// gzip: an answer past server.CompressMinBytes (16 KiB) goes out
	// compressed when the GET accepts it. The largest answer here is a
	// history (about 130 bytes of JSON a point): a second serve refreshing
	// ten times a second, keeping 200 points, soon has one that large.
	addr2 := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr2, "--fleet", fleetPath, "--interval", "100ms", "--history", "200",
		"--auth-tokens", tokens, "--log-level", "warn")
	histURL := getURL("http://"+addr2, "GetNodeHistory", &llmdiagv1.GetNodeHistoryRequest{Node: "deepseek-v4-0"})
	var zipped *http.Response
	var zbody []byte
	// About 125 refreshes at 100 ms: 13 s on a quiet machine, several
	// times that on a loaded one, where refreshes fall behind their interval.
	clitest.WaitFor(t, "a history over 16 KiB, gzipped", 3*time.Minute, func() bool {
		var err error
		zipped, zbody, err = tryGet(histURL, poller, "gzip")
		return err == nil && zipped.StatusCode == http.StatusOK && zipped.Header.Get("Content-Encoding") == "gzip"
	})
	if cc := zipped.Header.Get("Cache-Control"); cc != "private, no-cache" {
		t.Errorf("gzipped GET (--interval 100ms): Cache-Control %q, want private, no-cache", cc)
	}
	if v := zipped.Header.Values("Vary"); !slices.Contains(v, "Accept-Encoding") || !slices.Contains(v, "Authorization") {
		t.Errorf("gzipped GET: Vary %q, want Accept-Encoding and Authorization", v)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zbody))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	long := &llmdiagv1.GetNodeHistoryResponse{}
	if err != nil || len(unzipped) < 16<<10 || protojson.Unmarshal(unzipped, long) != nil || len(long.GetPoints()) < 100 {
		t.Errorf("gzipped history: %d bytes, %d JSON, %d points (%v)", len(zbody), len(unzipped), len(long.GetPoints()), err)
	}
	t.Logf("history of %d points: %d bytes of JSON, %d gzipped", len(long.GetPoints()), len(unzipped), len(zbody))
	if r, body := rawGet(t, histURL+"&x=1", poller, ""); r.Header.Get("Content-Encoding") != "" || len(body) < 16<<10 {
		t.Errorf("history GET not accepting gzip: Content-Encoding %q, %d bytes", r.Header.Get("Content-Encoding"), len(body))
	}

	// The limiter counts GETs like any call: the burst principal's bucket
	// (60, refilled at 20 a second) runs dry. The GETs go 16 at a time, so
	// that they outpace the refill however long each takes on a loaded
	// machine (one at a time, GETs of over 50 ms never would); once more
	// were sent than the bucket can have allowed, one must have been
	// refused.
	var (
		mu              sync.Mutex
		sent            int
		limited         bool
		refusal, failed string
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				mu.Lock()
				if limited || failed != "" || sent >= 400 {
					mu.Unlock()
					return
				}
				sent++
				mu.Unlock()
				resp, body, err := tryGet(u, burst, "")
				mu.Lock()
				switch {
				case err != nil:
					failed = err.Error()
				case resp.StatusCode == http.StatusTooManyRequests:
					if !strings.Contains(string(body), "rate") || resp.Header.Get("Cache-Control") != "no-store" {
						refusal = fmt.Sprintf("%s (Cache-Control %q)", body, resp.Header.Get("Cache-Control"))
					}
					limited = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed != "" {
		t.Fatal(failed)
	}
	if refusal != "" {
		t.Errorf("rate-limited GET: %s, want the limit named and no-store", refusal)
	}
	if !limited {
		t.Errorf("%d GETs in %v were never rate-limited (--rate-limit 20, --rate-burst 60: at most %.0f allowed)", sent, elapsed.Round(time.Millisecond), 60+20*elapsed.Seconds())
	}
}
