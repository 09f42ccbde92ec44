package server_test

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

// refusals is a refusal.Log as serve makes it, its lines in logs and its
// counter in reg.
type refusals struct {
	log  *refusal.Log
	logs *testkit.SyncBuffer
	reg  *prometheus.Registry
}

func newRefusals(t *testing.T) refusals {
	t.Helper()
	r := refusals{logs: &testkit.SyncBuffer{}, reg: prometheus.NewRegistry()}
	var err error
	r.log, err = refusal.New(refusal.Options{Log: slog.New(slog.NewTextHandler(r.logs, nil)), Registerer: r.reg})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// counts are llmdiag_refused_total by reason.
func (r refusals) counts(t *testing.T) map[refusal.Reason]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[refusal.Reason]float64{}
	for _, mf := range mfs {
		if mf.GetName() != refusal.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[refusal.Reason(m.GetLabel()[0].GetValue())] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestRefusalFloodIsCountedAndLogBounded: ten thousand requests without a
// credential, sent as fast as 32 connections carry them, are each refused
// and counted, and write at most the log's burst and two lines a second,
// never more than 100.
func TestRefusalFloodIsCountedAndLogBounded(t *testing.T) {
	r := newRefusals(t)
	srv := servertest.Start(t, servertest.Options{
		Registry: r.reg,
		Refusals: r.log,
		Limits:   &server.Limits{},
		Wrap:     func(h http.Handler) http.Handler { return server.Authorize(h, &auth.Authenticator{}, r.log) },
	})
	const total, workers = 10_000, 32
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	// Half ask a procedure, half a long path of the caller's choosing.
	long := srv.URL + "/" + strings.Repeat("x", 4000)
	var next, unauthorized atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				var req *http.Request
				if i%2 == 0 {
					req, _ = http.NewRequest(http.MethodGet, long, nil)
				} else {
					req, _ = http.NewRequest(http.MethodPost, srv.URL+llmdiagv1connect.DiagnosisServiceListNodesProcedure, strings.NewReader("{}"))
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					unauthorized.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := unauthorized.Load(); n != total {
		t.Fatalf("%d of %d requests answered 401", n, total)
	}
	counts := r.counts(t)
	for _, reason := range refusal.Reasons {
		want := 0.0
		if reason == refusal.Auth {
			want = total
		}
		if counts[reason] != want {
			t.Errorf("%s{reason=%q} = %g, want %g", refusal.MetricName, reason, counts[reason], want)
		}
	}
	lines := r.logs.Lines()
	bound := refusal.DefaultBurst + int(refusal.DefaultPerSecond*elapsed.Seconds()) + 1
	t.Logf("%d requests refused in %v: %d log lines (bound %d), counted %g", total, elapsed.Round(time.Millisecond), len(lines), bound, counts[refusal.Auth])
	if len(lines) > 100 || len(lines) > bound {
		t.Errorf("%d log lines in %v, want at most 100 and at most %d", len(lines), elapsed, bound)
	}
	var suppressed int
	for _, l := range lines {
		if !strings.Contains(l, "request denied") || !strings.Contains(l, "refused=auth") {
			t.Errorf("line %q: want a denial of reason auth", l)
		}
		if strings.Contains(l, strings.Repeat("x", 300)) {
			t.Errorf("line quotes more than 256 bytes of the path: %.400s", l)
		}
		if _, s, ok := strings.Cut(l, "suppressed="); ok {
			var n int
			for _, c := range s {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			suppressed += n
		}
	}
	if len(lines) > refusal.DefaultBurst && suppressed == 0 {
		t.Errorf("%d lines, none saying how many were suppressed", len(lines))
	}
	if len(lines)+suppressed > total {
		t.Errorf("%d lines and %d suppressed: more than the %d refusals", len(lines), suppressed, total)
	}
}

// TestRefusalReasons: each kind of refusal the port makes is counted under
// its reason, and only there.
func TestRefusalReasons(t *testing.T) {
	post := func(t *testing.T, url string, body []byte, header http.Header) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+llmdiagv1connect.DiagnosisServiceListNodesProcedure, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	gzipped := func(n int) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(bytes.Repeat([]byte(" "), n))
		_ = zw.Close()
		return b.Bytes()
	}
	tests := []struct {
		name   string
		limits server.Limits
		tls    bool
		refuse func(t *testing.T, url string)
		reason refusal.Reason
	}{
		{
			name:   "rate",
			limits: server.Limits{RateLimit: 0.001, RateBurst: 1},
			refuse: func(t *testing.T, url string) {
				if s := post(t, url, []byte("{}"), nil); s != http.StatusOK {
					t.Fatalf("first call: %d", s)
				}
				if s := post(t, url, []byte("{}"), nil); s != http.StatusTooManyRequests {
					t.Fatalf("second call: %d, want 429", s)
				}
			},
			reason: refusal.Rate,
		},
		{
			name: "size: a body over the limit",
			refuse: func(t *testing.T, url string) {
				if s := post(t, url, bytes.Repeat([]byte(" "), server.MaxRequestBytes+8<<10), nil); s == http.StatusOK {
					t.Fatal("answered a body over the limit")
				}
			},
			reason: refusal.Size,
		},
		{
			name: "size: a gzip bomb",
			refuse: func(t *testing.T, url string) {
				if s := post(t, url, gzipped(8*server.MaxRequestBytes), http.Header{"Content-Encoding": {"gzip"}}); s == http.StatusOK {
					t.Fatal("answered a gzip bomb")
				}
			},
			reason: refusal.Size,
		},
		{
			name: "handshake",
			tls:  true,
			refuse: func(t *testing.T, url string) {
				c, err := net.Dial("tcp", strings.TrimPrefix(url, "https://"))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_, _ = c.Write(bytes.Repeat([]byte{0}, 64)) // not a TLS record
				_, _ = io.Copy(io.Discard, c)
			},
			reason: refusal.Handshake,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRefusals(t)
			o := servertest.Options{Registry: r.reg, Refusals: r.log, Limits: &tt.limits}
			if tt.tls {
				ca := certtest.NewCA(t, "refusals")
				o.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}
			}
			srv := servertest.Start(t, o)
			tt.refuse(t, srv.URL)
			// The handshake's line is written after the client sees its
			// connection closed: wait for it (generously, under load).
			testkit.Wait{For: 30 * time.Second, Last: r.logs.String}.Until(t, "refusal counted", func() bool { return r.counts(t)[tt.reason] >= 1 })
			for reason, n := range r.counts(t) {
				want := 0.0
				if reason == tt.reason {
					want = 1
				}
				if n != want {
					t.Errorf("%s{reason=%q} = %g, want %g", refusal.MetricName, reason, n, want)
				}
			}
			logs := r.logs.String()
			if !strings.Contains(logs, "refused="+string(tt.reason)) {
				t.Errorf("no line of reason %s in %q", tt.reason, logs)
			}
		})
	}
}

// TestConnectionCapRefusalCounted: a connection beyond the cap is closed,
// counted under connections, and its line names the flag.
func TestConnectionCapRefusalCounted(t *testing.T) {
	r := newRefusals(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped := server.LimitConnections(ln, server.ConnLimits{Max: 1, Refusals: r.log})
	t.Cleanup(func() { capped.Close() })
	var kept []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range kept {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := capped.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			kept = append(kept, c)
			mu.Unlock()
		}
	}()
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	testkit.Wait{For: 30 * time.Second}.Until(t, "first connection accepted", func() bool { mu.Lock(); defer mu.Unlock(); return len(kept) == 1 })
	second, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	// Closed by the cap: the read ends (after the refusal was counted).
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := second.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("second connection: read %d, %v; want it closed", n, err)
	}
	if got := r.counts(t); got[refusal.Connections] != 1 || got[refusal.Auth] != 0 {
		t.Errorf("counts %v, want connections 1", got)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "connection refused") || !strings.Contains(logs, "limit=--max-connections") || !strings.Contains(logs, "refused=connections") {
		t.Errorf("log %q: want the refusal naming --max-connections", logs)
	}
}
