package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store/memory"
)

// seenRequest is what the handler saw of one request.
type seenRequest struct {
	path       string
	protoMajor int
	tls        bool
	verifiedCN string // the verified client certificate's common name
}

// tlsServer is the service on a loopback port, over TLS when cfg is not
// nil, recording what each request carried.
type tlsServer struct {
	addr string
	mu   sync.Mutex
	seen []seenRequest
}

func (s *tlsServer) take() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.seen
	s.seen = nil
	return r
}

func startTLSServer(t *testing.T, cfg *tls.Config) *tlsServer {
	t.Helper()
	ready := make(chan struct{})
	close(ready)
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	svc := server.NewService(memory.New(memory.Options{}, "tls"), nil, log, time.Now, server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: 30 * time.Second}, ctx.Done())
	h := server.Handler(svc, server.NewHealth(ready), prometheus.NewRegistry())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{addr: ln.Addr().String()}
	rec := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sr := seenRequest{path: r.URL.Path, protoMajor: r.ProtoMajor, tls: r.TLS != nil}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			sr.verifiedCN = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		s.mu.Lock()
		s.seen = append(s.seen, sr)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	done := make(chan error, 1)
	go func() {
		if cfg == nil {
			done <- server.Serve(ctx, ln, rec, log, 5*time.Second)
			return
		}
		done <- server.ServeTLS(ctx, ln, rec, log, 5*time.Second, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// tlsFiles are a CA, and a server certificate it signed, in files.
type tlsFiles struct {
	ca                *certtest.CA
	caFile            string
	certFile, keyFile string
	dir               string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "llmdiag test CA")
	f := tlsFiles{ca: ca, dir: dir, caFile: ca.WriteFile(t, dir, "ca.pem")}
	f.certFile, f.keyFile = ca.Server(t).WriteFiles(t, dir, "server")
	return f
}

func newTLSConfig(t *testing.T, o server.TLSOptions) *tls.Config {
	t.Helper()
	cfg, err := server.NewTLSConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTLSEveryProtocol: over TLS, every protocol of the client package,
// grpc-go and the health service answer, each over HTTP/2 negotiated by
// ALPN.
func TestTLSEveryProtocol(t *testing.T) {
	f := newTLSFiles(t)
	srv := startTLSServer(t, newTLSConfig(t, server.TLSOptions{CertFile: f.certFile, KeyFile: f.keyFile}))
	url := "https://" + srv.addr
	apis := map[string]api{}
	for _, p := range []client.Protocol{client.ProtocolConnect, client.ProtocolConnectJSON, client.ProtocolGRPC, client.ProtocolGRPCWeb} {
		c, err := client.New(url, client.WithProtocol(p), client.WithCA(f.ca.Pool()))
		if err != nil {
			t.Fatal(err)
		}
		apis["connect-go/"+string(p)] = connectAPI{c}
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: f.ca.Pool()})
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	apis["grpc-go"] = grpcAPI{llmdiagv1.NewDiagnosisServiceClient(conn)}

	for name, a := range apis {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if _, err := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{}); err != nil {
			t.Errorf("%s: ListNodes: %v", name, err)
		}
		recv, err := a.stream(ctx, &llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(time.Minute)})
		if err != nil {
			t.Errorf("%s: StreamHealth: %v", name, err)
		} else if ev, err := recv(); err != nil || ev.GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED {
			t.Errorf("%s: StreamHealth's first event %v, %v; want SYNCED", name, ev, err)
		}
		cancel()
		for _, r := range srv.take() {
			if !r.tls || r.protoMajor != 2 {
				t.Errorf("%s: %s came over HTTP/%d, TLS %v; want HTTP/2 over TLS", name, r.path, r.protoMajor, r.tls)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, err := grpchealthv1.NewHealthClient(conn).Check(ctx, &grpchealthv1.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != grpchealthv1.HealthCheckResponse_SERVING {
		t.Errorf("health over TLS: %v, %v", hr, err)
	}
}

// TestTLSNegotiation: ALPN picks h2 when offered and HTTP/1.1 otherwise
// (Connect answers over it); cleartext clients, h2c ones included, are
// refused on the TLS port; the plaintext port speaks h2c.
func TestTLSNegotiation(t *testing.T) {
	f := newTLSFiles(t)
	srv := startTLSServer(t, newTLSConfig(t, server.TLSOptions{CertFile: f.certFile, KeyFile: f.keyFile}))
	for _, tc := range []struct {
		offer []string
		want  string
	}{
		{[]string{"h2", "http/1.1"}, "h2"},
		{[]string{"http/1.1"}, "http/1.1"},
		{nil, ""},
	} {
		c, err := tls.Dial("tcp", srv.addr, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost", NextProtos: tc.offer})
		if err != nil {
			t.Fatalf("offer %v: %v", tc.offer, err)
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != tc.want {
			t.Errorf("offer %v: negotiated %q, want %q", tc.offer, got, tc.want)
		}
		c.Close()
	}

	// HTTP/1.1 over TLS: Connect's JSON answers.
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}}}
	resp, err := h1.Post("https://"+srv.addr+"/llmdiag.v1.DiagnosisService/ListNodes", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
		t.Errorf("HTTP/1.1 POST over TLS: %s over HTTP/%d: %s", resp.Status, resp.ProtoMajor, body)
	}

	// Cleartext on the TLS port: an HTTP/1 request is answered 400 in
	// plaintext, h2c's preface gets the connection closed; never an
	// HTTP/2 frame.
	for _, tc := range []struct{ send, want string }{
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ""},
		{"POST /llmdiag.v1.DiagnosisService/ListNodes HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.0 400 Bad Request\r\n"},
	} {
		raw, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(raw, tc.send); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(raw).ReadString('\n')
		raw.Close()
		if line != tc.want || (tc.want == "" && err != io.EOF) {
			t.Errorf("%q on the TLS port: answered %q (%v), want %q then the connection closed", tc.send[:4], line, err, tc.want)
		}
	}
	for _, p := range []client.Protocol{client.ProtocolGRPC, client.ProtocolConnect} {
		c, err := client.New("http://"+srv.addr, client.WithProtocol(p))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := (connectAPI{c}).listNodes(ctx, &llmdiagv1.ListNodesRequest{}); err == nil {
			t.Errorf("%s over cleartext h2c reached the TLS port", p)
		}
		cancel()
	}

	// Without TLS: h2c, for gRPC.
	plain := startTLSServer(t, nil)
	c, err := client.New("http://"+plain.addr, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := (connectAPI{c}).listNodes(ctx, &llmdiagv1.ListNodesRequest{}); err != nil {
		t.Fatalf("gRPC over h2c: %v", err)
	}
	if r := plain.take(); len(r) != 1 || r[0].protoMajor != 2 || r[0].tls {
		t.Errorf("plaintext port saw %+v, want one HTTP/2 request without TLS", r)
	}
	if _, err := client.New("http://"+plain.addr, client.WithCA(f.ca.Pool())); err == nil {
		t.Error("client.New accepted a CA for an http:// URL")
	}
}

// serialServed handshakes with addr and returns the serial of the
// certificate it presented.
func serialServed(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSCertificateRotation: a certificate written over the files is
// presented at the next handshake once the reload interval has passed,
// without a restart; a broken rewrite keeps the last good one in service.
func TestTLSCertificateRotation(t *testing.T) {
	f := newTLSFiles(t)
	clk := testkit.NewClock(time.Unix(2e9, 0))
	first, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := startTLSServer(t, newTLSConfig(t, server.TLSOptions{CertFile: f.certFile, KeyFile: f.keyFile, Now: clk.Now}))
	roots := f.ca.Pool()
	if got, want := serialServed(t, srv.addr, roots), first.Leaf.SerialNumber.String(); got != want {
		t.Fatalf("serial %s, want %s", got, want)
	}
	second := f.ca.Server(t)
	second.Write(t, f.certFile, f.keyFile)
	if got, want := serialServed(t, srv.addr, roots), first.Leaf.SerialNumber.String(); got != want {
		t.Fatalf("within the reload interval: serial %s, want still %s", got, want)
	}
	clk.Add(time.Second)
	if got, want := serialServed(t, srv.addr, roots), second.Cert.SerialNumber.String(); got != want {
		t.Fatalf("after the reload interval: serial %s, want the new %s", got, want)
	}
	// A client that verifies with the CA keeps working across the change.
	c, err := client.New("https://"+srv.addr, client.WithCA(roots), client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := (connectAPI{c}).listNodes(ctx, &llmdiagv1.ListNodesRequest{}); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	// Half a rotation (a certificate without its key) is not served.
	third := f.ca.Server(t)
	third.Write(t, f.certFile, filepath.Join(f.dir, "elsewhere.key"))
	clk.Add(time.Second)
	if got, want := serialServed(t, srv.addr, roots), second.Cert.SerialNumber.String(); got != want {
		t.Fatalf("certificate without its key: serial %s, want still %s", got, want)
	}
}

// TestMTLS: with a client CA, a client certificate it signed reaches the
// handler as a verified chain; one it did not sign fails the handshake; a
// client without one connects unless certificates are required; and a
// rewritten CA file is verified against without a restart.
func TestMTLS(t *testing.T) {
	f := newTLSFiles(t)
	clientCA, otherCA := certtest.NewCA(t, "clients"), certtest.NewCA(t, "strangers")
	clientCAFile := clientCA.WriteFile(t, f.dir, "clients.pem")
	trusted, untrusted := clientCA.Client(t, "router-1"), otherCA.Client(t, "mallory")
	clk := testkit.NewClock(time.Unix(2e9, 0))

	call := func(srv *tlsServer, pair *certtest.Pair, p client.Protocol) error {
		opts := []client.Option{client.WithCA(f.ca.Pool()), client.WithProtocol(p)}
		if pair != nil {
			opts = append(opts, client.WithClientCertificate(pair.TLS(t)))
		}
		c, err := client.New("https://"+srv.addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = (connectAPI{c}).listNodes(ctx, &llmdiagv1.ListNodesRequest{})
		return err
	}
	protocols := []client.Protocol{client.ProtocolConnect, client.ProtocolGRPC, client.ProtocolGRPCWeb}

	for _, required := range []bool{false, true} {
		srv := startTLSServer(t, newTLSConfig(t, server.TLSOptions{
			CertFile: f.certFile, KeyFile: f.keyFile, ClientCAFile: clientCAFile, RequireClientCert: required, Now: clk.Now,
		}))
		for _, p := range protocols {
			if err := call(srv, &trusted, p); err != nil {
				t.Fatalf("required=%v %s: trusted certificate: %v", required, p, err)
			}
			if r := srv.take(); len(r) != 1 || r[0].verifiedCN != "router-1" {
				t.Errorf("required=%v %s: the handler saw %+v, want a chain verified for router-1", required, p, r)
			}
			if err := call(srv, &untrusted, p); err == nil {
				t.Errorf("required=%v %s: an untrusted certificate got in", required, p)
			}
			if r := srv.take(); len(r) != 0 {
				t.Errorf("required=%v %s: a client with an untrusted certificate reached the handler: %+v", required, p, r)
			}
			err := call(srv, nil, p)
			if required && err == nil {
				t.Errorf("required %s: a client without a certificate got in", p)
			}
			if !required && err != nil {
				t.Errorf("%s: a client without a certificate (for a bearer token) was refused: %v", p, err)
			}
			for _, r := range srv.take() {
				if r.verifiedCN != "" {
					t.Errorf("required=%v %s: without a trusted certificate the handler saw a chain for %q", required, p, r.verifiedCN)
				}
			}
		}
	}

	// The handshake itself refuses the untrusted certificate, naming why.
	srv := startTLSServer(t, newTLSConfig(t, server.TLSOptions{CertFile: f.certFile, KeyFile: f.keyFile, ClientCAFile: clientCAFile, Now: clk.Now}))
	conn, err := tls.Dial("tcp", srv.addr, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { c := untrusted.TLS(t); return &c, nil }})
	if err == nil {
		// TLS 1.3: the client's handshake ends before the server has read
		// its certificate; the server's alert comes with the first read.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Errorf("untrusted certificate: %v, want the handshake refused for an unknown certificate authority", err)
	}

	// The CA file rewritten: the other CA's clients get in, the first's no
	// longer, once the reload interval has passed.
	if err := call(srv, &untrusted, client.ProtocolGRPC); err == nil {
		t.Fatal("untrusted certificate accepted before the CA changed")
	}
	if err := os.WriteFile(clientCAFile, otherCA.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if err := call(srv, &untrusted, client.ProtocolGRPC); err != nil {
		t.Fatalf("after the CA file changed, its client: %v", err)
	}
	if err := call(srv, &trusted, client.ProtocolGRPC); err == nil {
		t.Fatal("after the CA file changed, the old CA's client still got in")
	}
}
