package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

// healthCheck is a Connect unary health check over HTTP/1.1.
const healthCheck = "POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

// h2Preface is a cleartext HTTP/2 client's first bytes: the preface and an
// empty SETTINGS frame, and no stream.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// pendingServer serves with the pending limits, over TLS or not; addr is
// its host:port.
func pendingServer(t *testing.T, secure bool, lim server.PendingLimits) (r refusals, addr string, clientTLS *tls.Config) {
	t.Helper()
	r = newRefusals(t)
	o := servertest.Options{Registry: r.reg, Refusals: r.log, Limits: &server.Limits{}, Pending: lim}
	if secure {
		ca := certtest.NewCA(t, "pending")
		o.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}
		clientTLS = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	}
	srv := servertest.Start(t, o)
	_, addr, _ = strings.Cut(srv.URL, "://")
	return r, addr, clientTLS
}

// dial opens a connection from ip, closed with the test; with clientTLS
// it completes a TLS handshake offering proto.
func dial(t *testing.T, ip, addr string, clientTLS *tls.Config, proto string) net.Conn {
	t.Helper()
	c, err := from(ip).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if clientTLS != nil && proto != "" {
		cfg := clientTLS.Clone()
		cfg.NextProtos = []string{proto}
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake from %s: %v", ip, err)
		}
		return tc
	}
	return c
}

// ask makes a health check on c over HTTP/1.1 and fails the test unless it
// is answered 200; c stays open, idle.
func ask(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, healthCheck); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health check: %s", resp.Status)
	}
}

// closedByServer reads c until it ends and reports whether the server
// closed it (rather than the read deadline passing).
func closedByServer(c net.Conn) bool {
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// h2Client is an HTTP/2 client with a connection of its own from ip (h2
// by ALPN with clientTLS, cleartext HTTP/2 without).
func h2Client(t *testing.T, ip string, clientTLS *tls.Config) *http.Client {
	t.Helper()
	var p http.Protocols
	tr := &http.Transport{DialContext: from(ip).DialContext, TLSClientConfig: clientTLS, Protocols: &p}
	if clientTLS != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func h2Check(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTP/2 health check: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/2 health check: %s over %s", resp.Status, resp.Proto)
	}
}

// TestPendingConnectionsCappedPerHost: an address holding its cap of
// connections that sent nothing has its next one closed at accept,
// counted under connections and logged naming the flag, while another
// address is answered; and connections that have sent a request (idle
// keep-alive, HTTP/1 and HTTP/2) are never held to the cap.
func TestPendingConnectionsCappedPerHost(t *testing.T) {
	const perHost = 3
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "cleartext", true: "tls"}[secure], func(t *testing.T) {
			r, addr, clientTLS := pendingServer(t, secure, server.PendingLimits{MaxPerHost: perHost, Timeout: time.Hour})
			base := map[bool]string{false: "http://", true: "https://"}[secure] + addr
			// 127.0.0.1 holds its cap: TCP alone, a finished handshake,
			// an HTTP/2 preface without a stream.
			dial(t, "127.0.0.1", addr, nil, "")
			if secure {
				dial(t, "127.0.0.1", addr, clientTLS, "http/1.1")
				c := dial(t, "127.0.0.1", addr, clientTLS, "h2")
				_, _ = io.WriteString(c, h2Preface[:24])
			} else {
				dial(t, "127.0.0.1", addr, nil, "")
				c := dial(t, "127.0.0.1", addr, nil, "")
				_, _ = io.WriteString(c, h2Preface)
			}
			// Its next is closed at accept, before a handshake.
			over, err := from("127.0.0.1").Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer over.Close()
			_ = over.SetDeadline(time.Now().Add(30 * time.Second))
			if !closedByServer(over) {
				t.Fatalf("connection %d from 127.0.0.1 not closed", perHost+1)
			}
			if got := r.counts(t); got[refusal.Connections] != 1 {
				t.Errorf("connections refused %g, want 1", got[refusal.Connections])
			}
			if logs := r.logs.String(); !strings.Contains(logs, "limit=--max-pending-conns-per-ip") || !strings.Contains(logs, "remote=127.0.0.1:") {
				t.Errorf("log %q: want the refusal naming --max-pending-conns-per-ip and the address", logs)
			}

			// Twice the cap from 127.0.0.2, each having made a call and
			// kept open, idle: none is pending, all are answered, over
			// HTTP/1.1 and HTTP/2.
			for range 2 * perHost {
				c := dial(t, "127.0.0.2", addr, clientTLS, "http/1.1")
				ask(t, c, bufio.NewReader(c))
				h2Check(t, h2Client(t, "127.0.0.2", clientTLS), base)
			}
			if got := r.counts(t); got[refusal.Connections] != 1 || got[refusal.Handshake] != 0 {
				t.Errorf("after 127.0.0.2's calls, refused %v; want 1 connection (127.0.0.1's) and nothing else", got)
			}
		})
	}
}

// TestPendingConnectionsClosedAtTheDeadline: connections that have sent no
// request (nothing at all, a handshake alone, an HTTP/2 preface without a
// stream) are closed once the deadline has passed since they were
// accepted, each counted once under handshake and logged naming the flag;
// one that has made a call is kept and answered after it.
func TestPendingConnectionsClosedAtTheDeadline(t *testing.T) {
	const timeout = time.Second
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "cleartext", true: "tls"}[secure], func(t *testing.T) {
			r, addr, clientTLS := pendingServer(t, secure, server.PendingLimits{MaxPerHost: server.DefaultMaxPendingPerHost, Timeout: timeout})
			start := time.Now()
			called := dial(t, "127.0.0.1", addr, clientTLS, "http/1.1")
			br := bufio.NewReader(called)
			ask(t, called, br)
			idle := map[string]net.Conn{"nothing sent": dial(t, "127.0.0.1", addr, nil, "")}
			if secure {
				idle["handshake alone"] = dial(t, "127.0.0.1", addr, clientTLS, "http/1.1")
				c := dial(t, "127.0.0.1", addr, clientTLS, "h2")
				_, _ = io.WriteString(c, h2Preface)
				idle["h2 preface alone"] = c
			} else {
				c := dial(t, "127.0.0.1", addr, nil, "")
				_, _ = io.WriteString(c, h2Preface)
				idle["h2 preface alone"] = c
			}
			for name, c := range idle {
				if !closedByServer(c) {
					t.Fatalf("%s: not closed", name)
				}
			}
			if took := time.Since(start); took < timeout {
				t.Errorf("closed after %v, before the deadline %v", took, timeout)
			}
			ask(t, called, br)
			// A handshake broken off is counted once, by the deadline, not
			// again from net/http's error log.
			testkit.Wait{For: 30 * time.Second, Last: r.logs.String}.Until(t, "refusals counted", func() bool { return r.counts(t)[refusal.Handshake] >= float64(len(idle)) })
			for reason, n := range r.counts(t) {
				want := 0.0
				if reason == refusal.Handshake {
					want = float64(len(idle))
				}
				if n != want {
					t.Errorf("%s{reason=%q} = %g, want %g", refusal.MetricName, reason, n, want)
				}
			}
			if logs := r.logs.String(); !strings.Contains(logs, "limit=--handshake-timeout") || !strings.Contains(logs, "refused=handshake") {
				t.Errorf("log %q: want the deadline's line naming --handshake-timeout", logs)
			}
		})
	}
}
