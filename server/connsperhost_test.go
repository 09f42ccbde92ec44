package server_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/server"
)

// from dials from the loopback address ip (Linux routes all of 127/8 to
// lo, so a test has many client addresses).
func from(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 30 * time.Second}
}

// TestConnectionsCappedPerHost: one address holding its cap of idle
// connections has its next one closed at accept, counted under
// connections and logged naming --max-conns-per-ip, while another address
// still gets health checks and unary calls answered.
func TestConnectionsCappedPerHost(t *testing.T) {
	const perHost = 4
	r := newRefusals(t)
	srv := servertest.Start(t, servertest.Options{
		Registry: r.reg,
		Refusals: r.log,
		Limits:   &server.Limits{},
		Conns:    &server.ConnLimits{Max: server.DefaultMaxConnections, MaxPerHost: perHost},
	})
	addr := strings.TrimPrefix(srv.URL, "http://")
	hog := from("127.0.0.1")
	// Each held connection is proved accepted (an answer on it) before the
	// next is opened.
	for i := range perHost {
		c, err := hog.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte("GET /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 12)
		if n, err := c.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1") {
			t.Fatalf("held connection %d: %q, %v", i, buf[:n], err)
		}
	}
	over, err := hog.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = over.Write([]byte("GET /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: x\r\n\r\n"))
	if n, err := over.Read(make([]byte, 64)); n != 0 || err == nil {
		t.Fatalf("connection %d from 127.0.0.1: read %d bytes, %v; want it closed", perHost+1, n, err)
	}
	if got := r.counts(t); got[refusal.Connections] != 1 {
		t.Errorf("connections refused %g, want 1", got[refusal.Connections])
	}
	if logs := r.logs.String(); !strings.Contains(logs, "limit=--max-conns-per-ip") || !strings.Contains(logs, "remote=127.0.0.1:") {
		t.Errorf("log %q: want the refusal naming --max-conns-per-ip and the address", logs)
	}

	// Another address is answered, health checks and unary calls.
	tr := &http.Transport{DialContext: from("127.0.0.2").DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for _, proc := range []string{"/grpc.health.v1.Health/Check", llmdiagv1connect.DiagnosisServiceListNodesProcedure} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+proc, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s from 127.0.0.2: %v", proc, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s from 127.0.0.2: %s", proc, resp.Status)
		}
	}
	if got := r.counts(t); got[refusal.Connections] != 1 {
		t.Errorf("after 127.0.0.2's calls, connections refused %g, want 1", got[refusal.Connections])
	}
}
