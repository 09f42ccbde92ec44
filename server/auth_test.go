package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/llmdiag/llmdiag/auth"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

// Tokens of the acceptance test's tokens file.
const (
	readerToken  = "reader-token-0123456789abcdef"
	routerToken  = "router-token-0123456789abcdef"
	adminToken   = "admin-token-0123456789abcdef"
	unknownToken = "unknown-token-0123456789abcdef"
)

// stubService answers every DiagnosisService RPC with an empty message and
// the principal it sees in the x-principal response header.
type stubService struct {
	llmdiagv1connect.UnimplementedDiagnosisServiceHandler
}

func seenPrincipal(ctx context.Context) string {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return "none"
	}
	return p.Name + "/" + p.Role
}

func stubAnswer[T any](ctx context.Context) (*connect.Response[T], error) {
	r := connect.NewResponse(new(T))
	r.Header().Set("x-principal", seenPrincipal(ctx))
	return r, nil
}

func (stubService) ListNodes(ctx context.Context, _ *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	return stubAnswer[llmdiagv1.ListNodesResponse](ctx)
}

func (stubService) GetNode(ctx context.Context, _ *connect.Request[llmdiagv1.GetNodeRequest]) (*connect.Response[llmdiagv1.GetNodeResponse], error) {
	return stubAnswer[llmdiagv1.GetNodeResponse](ctx)
}

func (stubService) GetRoutability(ctx context.Context, _ *connect.Request[llmdiagv1.GetRoutabilityRequest]) (*connect.Response[llmdiagv1.GetRoutabilityResponse], error) {
	return stubAnswer[llmdiagv1.GetRoutabilityResponse](ctx)
}

func (stubService) GetNodeMetrics(ctx context.Context, _ *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	return stubAnswer[llmdiagv1.GetNodeMetricsResponse](ctx)
}

func (stubService) ComparePercentiles(ctx context.Context, _ *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	return stubAnswer[llmdiagv1.ComparePercentilesResponse](ctx)
}

func (stubService) DiagnoseNode(ctx context.Context, _ *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	return stubAnswer[llmdiagv1.DiagnoseNodeResponse](ctx)
}

func (stubService) GetNodeHistory(ctx context.Context, _ *connect.Request[llmdiagv1.GetNodeHistoryRequest]) (*connect.Response[llmdiagv1.GetNodeHistoryResponse], error) {
	return stubAnswer[llmdiagv1.GetNodeHistoryResponse](ctx)
}

func (stubService) StreamHealth(ctx context.Context, _ *connect.Request[llmdiagv1.StreamHealthRequest], s *connect.ServerStream[llmdiagv1.StreamHealthResponse]) error {
	s.ResponseHeader().Set("x-principal", seenPrincipal(ctx))
	return s.Send(&llmdiagv1.StreamHealthResponse{})
}

// authFixture is a TLS server with authentication, and what its clients
// present.
type authFixture struct {
	url       string
	serverCA  *certtest.CA
	clientCA  *certtest.CA
	requests  atomic.Int64 // that reached the handler behind Authorize
	logs      *testkit.SyncBuffer
	mapped    tls.Certificate    // issued by clientCA, mapped to admin
	unmapped  tls.Certificate    // issued by clientCA, mapped to nothing
	untrusted tls.Certificate    // issued by another CA
	serverLog testkit.SyncBuffer // the HTTP server's own errors
}

// refused counts the TLS handshakes the server refused for a client
// certificate it could not verify.
func (f *authFixture) refused() int {
	return strings.Count(f.serverLog.String(), "failed to verify certificate")
}

// startAuthServer serves server.Authorize(NewHandler(stub)) over TLS with
// HTTP/2, verifying client certificates if given: the configuration serve
// uses with --auth-tokens and --tls-client-ca.
func startAuthServer(t *testing.T, reflection bool) *authFixture {
	t.Helper()
	f := &authFixture{serverCA: certtest.NewCA(t, "server CA"), clientCA: certtest.NewCA(t, "client CA"), logs: &testkit.SyncBuffer{}}
	// The mapping names the certificate by its URI SAN, not its common
	// name; the rogue CA's certificate carries the same names.
	f.mapped = f.clientCA.Client(t, "oncall-laptop").TLS(t)
	f.unmapped = f.clientCA.Client(t, "router-9").TLS(t)
	f.untrusted = certtest.NewCA(t, "rogue CA").Client(t, "oncall-laptop").TLS(t)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	err := os.WriteFile(tokens, []byte(`
tokens:
  - {name: grafana, role: reader, token: `+readerToken+`}
  - {name: router-eu-1, role: router, token: `+routerToken+`}
  - {name: oncall, role: admin, token: `+adminToken+`}
clients:
  - {subject: "spiffe://llmdiag.test/oncall-laptop", role: admin, name: oncall-cert}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	file, err := auth.OpenFile(tokens, auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ready := make(chan struct{})
	close(ready)
	h := server.NewHandler(stubService{}, server.NewHealth(ready), server.Surfaces{Reflection: reflection, Metrics: prometheus.NewRegistry()})
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		h.ServeHTTP(w, r)
	})
	// Each denial's line is checked: a bound no call here reaches.
	refusals, err := refusal.New(refusal.Options{Log: logger, PerSecond: 1e6, Burst: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(server.Authorize(counted, &auth.Authenticator{Tokens: file}, refusals))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{f.serverCA.Server(t).TLS(t)},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    f.clientCA.Pool(),
		NextProtos:   []string{"h2", "http/1.1"},
	}
	srv.Config.ErrorLog = log.New(&f.serverLog, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// client returns an HTTPS client trusting the server's CA, presenting cert
// (if any) and token (if any).
func (f *authFixture) client(t *testing.T, token string, cert *tls.Certificate) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: f.serverCA.Pool()}
	if cert != nil {
		// Sent whatever CAs the server names: Go's own choice would leave
		// out a certificate from an unnamed CA, where curl and grpcurl send
		// it.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if token != "" {
		rt = testkit.Bearer{Token: token, Next: tr}
	}
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}
}

// call is one procedure called by a client: the error (nil when it
// answered) and the principal the service saw ("" when not the service).
type call func(ctx context.Context, hc *http.Client, url string, opts ...connect.ClientOption) (principal string, err error)

func unary[Req, Resp any](procedure string) call {
	return func(ctx context.Context, hc *http.Client, url string, opts ...connect.ClientOption) (string, error) {
		resp, err := connect.NewClient[Req, Resp](hc, url+procedure, opts...).CallUnary(ctx, connect.NewRequest(new(Req)))
		if err != nil {
			return "", err
		}
		return resp.Header().Get("x-principal"), nil
	}
}

func streamHealth(ctx context.Context, hc *http.Client, url string, opts ...connect.ClientOption) (string, error) {
	s, err := llmdiagv1connect.NewDiagnosisServiceClient(hc, url, opts...).StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
	if err != nil {
		return "", err
	}
	defer s.Close()
	if !s.Receive() {
		if s.Err() == nil {
			return "", errors.New("stream ended without a message")
		}
		return "", s.Err()
	}
	return s.ResponseHeader().Get("x-principal"), nil
}

func reflectionList(ctx context.Context, hc *http.Client, url string, opts ...connect.ClientOption) (string, error) {
	s := connect.NewClient[reflectionv1.ServerReflectionRequest, reflectionv1.ServerReflectionResponse](hc, url+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", opts...).CallBidiStream(ctx)
	err := s.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: the answer says why
		return "", err
	}
	_ = s.CloseRequest()
	resp, err := s.Receive()
	_ = s.CloseResponse()
	if err != nil {
		return "", err
	}
	if len(resp.GetListServicesResponse().GetService()) == 0 {
		return "", errors.New("reflection listed no services")
	}
	return "", nil
}

func TestAuthMatrix(t *testing.T) {
	procedures := []struct {
		name string
		call call
		// allowed: the roles that may call it; "*" for everyone.
		allowed []string
		service bool // answered by the service, which reports its principal
	}{
		{"ListNodes", unary[llmdiagv1.ListNodesRequest, llmdiagv1.ListNodesResponse](llmdiagv1connect.DiagnosisServiceListNodesProcedure), []string{"reader", "router", "admin"}, true},
		{"GetNode", unary[llmdiagv1.GetNodeRequest, llmdiagv1.GetNodeResponse](llmdiagv1connect.DiagnosisServiceGetNodeProcedure), []string{"reader", "router", "admin"}, true},
		{"GetNodeMetrics", unary[llmdiagv1.GetNodeMetricsRequest, llmdiagv1.GetNodeMetricsResponse](llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure), []string{"reader", "router", "admin"}, true},
		{"ComparePercentiles", unary[llmdiagv1.ComparePercentilesRequest, llmdiagv1.ComparePercentilesResponse](llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure), []string{"reader", "router", "admin"}, true},
		{"DiagnoseNode", unary[llmdiagv1.DiagnoseNodeRequest, llmdiagv1.DiagnoseNodeResponse](llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure), []string{"reader", "router", "admin"}, true},
		{"GetNodeHistory", unary[llmdiagv1.GetNodeHistoryRequest, llmdiagv1.GetNodeHistoryResponse](llmdiagv1connect.DiagnosisServiceGetNodeHistoryProcedure), []string{"reader", "router", "admin"}, true},
		{"StreamHealth", streamHealth, []string{"router", "admin"}, true},
		{"GetRoutability", unary[llmdiagv1.GetRoutabilityRequest, llmdiagv1.GetRoutabilityResponse](llmdiagv1connect.DiagnosisServiceGetRoutabilityProcedure), []string{"router", "admin"}, true},
		{"Reflection", reflectionList, []string{"admin"}, false},
		{"Health", unary[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse]("/grpc.health.v1.Health/Check"), []string{"*"}, false},
	}
	protocols := []struct {
		name string
		opts []connect.ClientOption
	}{
		{"Connect", nil},
		{"gRPC", []connect.ClientOption{connect.WithGRPC()}},
		{"gRPC-Web", []connect.ClientOption{connect.WithGRPCWeb()}},
	}
	type creds struct {
		name  string
		token string
		cert  func(f *authFixture) *tls.Certificate
		// principal the service sees ("" none); role what it may call.
		principal, role string
		// unauthenticated: refused as such (no or an unknown credential);
		// handshake: the TLS handshake itself fails, since the server
		// verifies a client certificate when one is given
		// (tls.VerifyClientCertIfGiven): not even health answers.
		unauthenticated, handshake bool
	}
	credentials := []creds{
		{name: "no credentials", unauthenticated: true},
		{name: "unknown token", token: unknownToken, unauthenticated: true},
		{name: "reader token", token: readerToken, principal: "grafana", role: "reader"},
		{name: "router token", token: routerToken, principal: "router-eu-1", role: "router"},
		{name: "admin token", token: adminToken, principal: "oncall", role: "admin"},
		{name: "client certificate", cert: func(f *authFixture) *tls.Certificate { return &f.mapped }, principal: "oncall-cert", role: "admin"},
		{name: "unmapped client certificate", cert: func(f *authFixture) *tls.Certificate { return &f.unmapped }, principal: "router-9", role: ""},
		{name: "untrusted client certificate", cert: func(f *authFixture) *tls.Certificate { return &f.untrusted }, handshake: true},
		{name: "untrusted client certificate and router token", token: routerToken, cert: func(f *authFixture) *tls.Certificate { return &f.untrusted }, handshake: true},
	}
	for _, reflection := range []bool{true, false} {
		f := startAuthServer(t, reflection)
		for _, cr := range credentials {
			var cert *tls.Certificate
			if cr.cert != nil {
				cert = cr.cert(f)
			}
			for _, proto := range protocols {
				// A client per protocol: connections (and their
				// handshakes) are not shared between cases.
				hc := f.client(t, cr.token, cert)
				for _, p := range procedures {
					name := p.name + "/" + proto.name + "/" + cr.name
					if !reflection {
						name += "/no reflection"
					}
					allowed := false
					for _, r := range p.allowed {
						allowed = allowed || r == "*" || r == cr.role
					}
					var want connect.Code // 0: answered
					switch {
					case p.allowed[0] == "*":
					case cr.unauthenticated:
						want = connect.CodeUnauthenticated
					case !allowed:
						want = connect.CodePermissionDenied
					case p.name == "Reflection" && !reflection:
						want = connect.CodeUnimplemented
					}
					before, handshakesBefore, logFrom := f.requests.Load(), f.refused(), f.serverLog.Len()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					principal, err := p.call(ctx, hc, f.url, proto.opts...)
					cancel()
					if cr.handshake {
						// The client's error depends on when it learns
						// (before or after writing its request); the
						// server's log says what happened.
						if err == nil {
							t.Errorf("%s: answered; want the TLS handshake refused", name)
							continue
						}
						// Generous: the server logs the refusal after the
						// client has its error, and a loaded machine with
						// -race can take seconds to get there.
						testkit.Wait{For: 30 * time.Second, Last: func() string { return f.serverLog.String()[logFrom:] }}.Until(t, name+": handshake refused", func() bool { return f.refused() > handshakesBefore })
						if n := f.requests.Load() - before; n != 0 {
							t.Errorf("%s: %d requests reached the server", name, n)
						}
						continue
					}
					if got := connect.CodeOf(err); (err == nil) != (want == 0) || (err != nil && got != want) {
						t.Errorf("%s: got %v, want %v", name, err, codeName(want))
						continue
					}
					logs := f.logs.Lines()
					denied := want == connect.CodeUnauthenticated || want == connect.CodePermissionDenied
					switch {
					case denied:
						who := "anonymous"
						if !cr.unauthenticated {
							who = cr.principal
						}
						if len(logs) != 1 || !strings.Contains(logs[0], "principal="+who) || !strings.Contains(logs[0], "procedure=/") {
							t.Errorf("%s: denial logged as %q, want one line naming principal=%s and the procedure", name, logs, who)
						}
						if f.requests.Load() != before {
							t.Errorf("%s: a denied request reached the service", name)
						}
					default:
						if len(logs) != 0 {
							t.Errorf("%s: logged %q", name, logs)
						}
						if p.service && principal != cr.principal+"/"+cr.role {
							t.Errorf("%s: service saw principal %q, want %s/%s", name, principal, cr.principal, cr.role)
						}
					}
					for _, l := range logs {
						for _, tok := range []string{readerToken, routerToken, adminToken, unknownToken} {
							if strings.Contains(l, tok) {
								t.Errorf("%s: log line quotes a token: %s", name, l)
							}
						}
					}
				}
			}
		}
	}
}

func codeName(c connect.Code) string {
	if c == 0 {
		return "an answer"
	}
	return c.String()
}

// TestAuthPlainHTTP: paths that are not RPCs (/metrics, and any a later
// change adds) are closed too, with a plain HTTP status; a curl-style JSON
// call with a token works.
func TestAuthPlainHTTP(t *testing.T) {
	f := startAuthServer(t, true)
	for _, c := range []struct {
		method, path, token string
		body                string
		want                int
	}{
		{"GET", "/metrics", "", "", http.StatusUnauthorized},
		{"GET", "/metrics", readerToken, "", http.StatusForbidden},
		{"GET", "/metrics", routerToken, "", http.StatusForbidden},
		{"GET", "/metrics", adminToken, "", http.StatusOK},
		{"GET", "/debug/pprof/", readerToken, "", http.StatusForbidden},
		{"GET", "/debug/pprof/", adminToken, "", http.StatusNotFound},
		{"GET", "/nothing-here", "", "", http.StatusUnauthorized},
		// The console's page is public (its data is not); this server
		// mounts no console, so the path is simply not found.
		{"GET", "/", "", "", http.StatusNotFound},
		{"POST", llmdiagv1connect.DiagnosisServiceListNodesProcedure, "", "{}", http.StatusUnauthorized},
		{"POST", llmdiagv1connect.DiagnosisServiceListNodesProcedure, unknownToken, "{}", http.StatusUnauthorized},
		{"POST", llmdiagv1connect.DiagnosisServiceListNodesProcedure, readerToken, "{}", http.StatusOK},
		{"POST", llmdiagv1connect.DiagnosisServiceStreamHealthProcedure, readerToken, "{}", http.StatusForbidden},
		{"POST", "/grpc.health.v1.Health/Check", "", "{}", http.StatusOK},
	} {
		req, err := http.NewRequest(c.method, f.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := f.client(t, c.token, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s with %q: HTTP %d %s, want %d", c.method, c.path, c.token, resp.StatusCode, body, c.want)
		}
		if c.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", c.method, c.path)
		}
	}
}

// TestAuthTokensReloaded: a token added to the file works without a
// restart, and a revoked one stops working.
func TestAuthTokensReloaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	write := func(name, tok string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte("tokens:\n  - {name: "+name+", role: reader, token: "+tok+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("old", readerToken)
	file, err := auth.OpenFile(path, auth.FileOptions{CheckEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.Authorize(server.NewHandler(stubService{}, server.NewHealth(nil), server.Surfaces{}), &auth.Authenticator{Tokens: file}, nil))
	t.Cleanup(srv.Close)
	code := func(tok string) connect.Code {
		hc := &http.Client{Transport: testkit.Bearer{Token: tok}}
		_, err := unary[llmdiagv1.ListNodesRequest, llmdiagv1.ListNodesResponse](llmdiagv1connect.DiagnosisServiceListNodesProcedure)(context.Background(), hc, srv.URL)
		if err == nil {
			return 0
		}
		return connect.CodeOf(err)
	}
	if code(readerToken) != 0 || code(routerToken) != connect.CodeUnauthenticated {
		t.Fatalf("before rotation: %v, %v", code(readerToken), code(routerToken))
	}
	write("new", routerToken)
	testkit.Eventually(t, 10*time.Second, "rotated token accepted", func() bool { return code(routerToken) == 0 })
	if c := code(readerToken); c != connect.CodeUnauthenticated {
		t.Errorf("revoked token: %v", c)
	}
}

func TestCheckExposure(t *testing.T) {
	for _, c := range []struct {
		addr                 string
		tls, authn, insecure bool
		wantErr, wantWarning string
	}{
		{addr: "127.0.0.1:8080"},
		{addr: "[::1]:8080"},
		{addr: "localhost:8080"},
		{addr: "127.0.0.2:8080"},
		{addr: "0.0.0.0:8080", wantErr: "needs --insecure"},
		{addr: ":8080", wantErr: "without TLS (--tls-cert, --tls-key) and authentication"},
		{addr: "10.0.0.5:8080", tls: true, wantErr: "without authentication"},
		{addr: "10.0.0.5:8080", authn: true, wantErr: "without TLS"},
		{addr: "myhost:8080", wantErr: "not a loopback address"},
		{addr: "[::]:8080", tls: true, authn: true},
		{addr: ":8080", insecure: true, wantWarning: "(--insecure)"},
		{addr: ":8080", authn: true, insecure: true, wantWarning: "without TLS"},
	} {
		warn, err := server.CheckExposure(c.addr, c.tls, c.authn, c.insecure)
		if (err != nil) != (c.wantErr != "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%+v: error %v, want %q", c, err, c.wantErr)
		}
		if (warn != "") != (c.wantWarning != "") || !strings.Contains(warn, c.wantWarning) {
			t.Errorf("%+v: warning %q, want %q", c, warn, c.wantWarning)
		}
	}
}

func TestPrincipalOr(t *testing.T) {
	key := server.PrincipalOr(func(r *http.Request) string { return "host " + r.RemoteAddr })
	r := httptest.NewRequest("GET", "/", nil)
	if got := key(r); got != "host "+r.RemoteAddr {
		t.Errorf("no principal: %q", got)
	}
	r = r.WithContext(auth.NewContext(r.Context(), auth.Principal{Name: "router-eu-1", Role: auth.RoleRouter}))
	if got := key(r); got != "router-eu-1 (router)" {
		t.Errorf("principal: %q", got)
	}
}
