package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

const (
	readerTok = "rdr-0123456789abcdef0123456789abcdef"
	routerTok = "rtr-0123456789abcdef0123456789abcdef"
	adminTok  = "adm-0123456789abcdef0123456789abcdef"
)

func TestExampleFile(t *testing.T) {
	f, err := auth.OpenFile("testdata/tokens.yaml", auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tok  string
		want auth.Principal
		ok   bool
	}{
		{readerTok, auth.Principal{Name: "grafana", Role: auth.RoleReader}, true},
		{routerTok, auth.Principal{Name: "router-eu-1", Role: auth.RoleRouter}, true},
		{adminTok, auth.Principal{Name: "oncall", Role: auth.RoleAdmin}, true},
		{readerTok[:len(readerTok)-1], auth.Principal{}, false}, // a prefix
		{readerTok + "x", auth.Principal{}, false},
		{"", auth.Principal{}, false},
	} {
		got, ok := f.Token(c.tok)
		if got != c.want || ok != c.ok {
			t.Errorf("Token(%q) = %v, %v; want %v, %v", c.tok, got, ok, c.want, c.ok)
		}
	}
	spiffe, _ := url.Parse("spiffe://cluster.local/ns/ops/sa/oncall")
	for _, c := range []struct {
		name string
		cert *x509.Certificate
		want auth.Principal
		ok   bool
	}{
		{"CN", &x509.Certificate{Subject: pkix.Name{CommonName: "router-2.llmdiag.internal"}}, auth.Principal{Name: "router-2.llmdiag.internal", Role: auth.RoleRouter}, true},
		{"DNS SAN", &x509.Certificate{Subject: pkix.Name{CommonName: "x"}, DNSNames: []string{"y", "router-2.llmdiag.internal"}}, auth.Principal{Name: "router-2.llmdiag.internal", Role: auth.RoleRouter}, true},
		{"URI SAN", &x509.Certificate{URIs: []*url.URL{spiffe}}, auth.Principal{Name: "oncall-cert", Role: auth.RoleAdmin}, true},
		{"email SAN", &x509.Certificate{EmailAddresses: []string{"router-2.llmdiag.internal"}}, auth.Principal{Name: "router-2.llmdiag.internal", Role: auth.RoleRouter}, true},
		{"unmapped", &x509.Certificate{Subject: pkix.Name{CommonName: "router-3"}, DNSNames: []string{"router-3.llmdiag.internal"}}, auth.Principal{}, false},
		{"OU is not a subject", &x509.Certificate{Subject: pkix.Name{OrganizationalUnit: []string{"router-2.llmdiag.internal"}}}, auth.Principal{}, false},
	} {
		got, ok := f.Client(c.cert)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Client = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestBadFiles(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"not yaml", "tokens: [", "yaml"},
		{"unknown field", "tokens:\n  - name: a\n    role: reader\n    secret: x\n", "field secret not found"},
		{"no name", "tokens:\n  - role: reader\n    token: " + readerTok + "\n", "no name"},
		{"bad role", "tokens:\n  - name: a\n    role: root\n    token: " + readerTok + "\n", `role "root"`},
		{"no token", "tokens:\n  - name: a\n    role: reader\n", "no token"},
		{"short token", "tokens:\n  - name: a\n    role: reader\n    token: short\n", "shorter than 16"},
		{"both", "tokens:\n  - name: a\n    role: reader\n    token: " + readerTok + "\n    token_sha256: " + strings.Repeat("ab", 32) + "\n", "not both"},
		{"bad sha", "tokens:\n  - name: a\n    role: reader\n    token_sha256: abc\n", "hex digits"},
		{"same token", "tokens:\n  - name: a\n    role: reader\n    token: " + readerTok + "\n  - name: b\n    role: admin\n    token: " + readerTok + "\n", "same token as a"},
		{"client without subject", "clients:\n  - role: router\n", "no subject"},
		{"client bad role", "clients:\n  - subject: s\n    role: superuser\n", `role "superuser"`},
		{"client twice", "clients:\n  - subject: s\n    role: router\n  - subject: s\n    role: admin\n", "listed twice"},
	} {
		path := filepath.Join(t.TempDir(), "tokens.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := auth.OpenFile(path, auth.FileOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), readerTok) {
			t.Errorf("%s: error quotes the token: %v", c.name, err)
		}
	}
	if _, err := auth.OpenFile(filepath.Join(t.TempDir(), "missing.yaml"), auth.FileOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// An empty file is valid: no one holds a token (all revoked).
	path := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.OpenFile(path, auth.FileOptions{}); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

func TestFileReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(yaml string) {
		t.Helper()
		// Atomic replace, as a secret mount or an editor does; a fresh
		// mtime each time, so the change shows even on coarse clocks.
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		mtime = mtime.Add(time.Second)
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(name, role, tok string) string {
		return "  - name: " + name + "\n    role: " + role + "\n    token: " + tok + "\n"
	}
	write("tokens:\n" + entry("a", "reader", readerTok))
	clk := testkit.NewClock(time.Unix(1e9, 0))
	var logs testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f, err := auth.OpenFile(path, auth.FileOptions{Now: clk.Now, CheckEvery: time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	has := func(tok string) bool { _, ok := f.Token(tok); return ok }
	if !has(readerTok) || has(routerTok) {
		t.Fatal("initial tokens wrong")
	}

	// Rotated: router added, reader revoked. Not looked at before
	// CheckEvery has passed; then in force.
	write("tokens:\n" + entry("b", "router", routerTok))
	clk.Add(500 * time.Millisecond)
	if !has(readerTok) || has(routerTok) {
		t.Fatal("file re-read before CheckEvery passed")
	}
	clk.Add(500 * time.Millisecond)
	if has(readerTok) || !has(routerTok) {
		t.Fatal("rotated file not in force after CheckEvery")
	}

	// Broken on reload: the previous tokens stay, the error is logged once.
	write("tokens:\n  - name: c\n    role: sudo\n    token: " + adminTok + "\n")
	for range 3 {
		clk.Add(time.Second)
		if !has(routerTok) || has(adminTok) {
			t.Fatal("a broken file replaced the tokens in force")
		}
	}
	got := logs.String()
	if n := strings.Count(got, "cannot be used"); n != 1 {
		t.Errorf("broken file logged %d times, want once:\n%s", n, got)
	}
	if strings.Contains(got, adminTok) || strings.Contains(got, routerTok) {
		t.Errorf("log quotes a token:\n%s", got)
	}

	// Removed: still the previous tokens. Fixed: in force.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if !has(routerTok) {
		t.Fatal("a removed file revoked the tokens in force")
	}
	write("tokens:\n" + entry("c", "admin", adminTok))
	clk.Add(time.Second)
	if p, ok := f.Token(adminTok); !ok || p.Role != auth.RoleAdmin || has(routerTok) {
		t.Fatalf("fixed file not in force: %v %v", p, ok)
	}
}

func TestAllowed(t *testing.T) {
	const (
		list    = llmdiagv1connect.DiagnosisServiceListNodesProcedure
		node    = llmdiagv1connect.DiagnosisServiceGetNodeProcedure
		metrics = llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure
		cmp     = llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure
		diag    = llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure
		hist    = llmdiagv1connect.DiagnosisServiceGetNodeHistoryProcedure
		stream  = llmdiagv1connect.DiagnosisServiceStreamHealthProcedure
		rt      = llmdiagv1connect.DiagnosisServiceGetRoutabilityProcedure
		reflect = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
		prom    = "/metrics"
		future  = "/debug/pprof/"
		mcp     = auth.MCPPath
		am      = auth.AlertmanagerPath
		route   = "/routable/glm-4.6-0"
	)
	all := []string{list, node, metrics, cmp, diag, hist, stream, rt, reflect, prom, future, mcp, am, route, "/routable/a/b", "/routable", "/mcp/", "/alertmanager/x", "/llmdiag.v1.DiagnosisService/ListNodes/", "/llmdiag.v1.DiagnosisService/"}
	want := map[string][]string{
		auth.RoleReader:       {list, node, metrics, cmp, diag, hist, mcp},
		auth.RoleRouter:       {list, node, metrics, cmp, diag, hist, stream, rt, mcp, route, "/routable/a/b"},
		auth.RoleAlertmanager: {am},
		auth.RoleAdmin:        all,
		"":                    nil,
		"Admin":               nil,
	}
	for role, allowed := range want {
		for _, p := range all {
			exp := false
			for _, a := range allowed {
				exp = exp || a == p
			}
			if got := auth.Allowed(role, p); got != exp {
				t.Errorf("Allowed(%q, %q) = %v, want %v", role, p, got, exp)
			}
		}
	}
	for p, want := range map[string]bool{
		"/grpc.health.v1.Health/Check": true, "/grpc.health.v1.Health/Watch": true,
		"/grpc.health.v1.Health/": false, "/grpc.health.v1.Health/Check/": false, list: false, prom: false,
		auth.SlackCommandPath: true, "/slack/command/": false, "/runbooks/overloaded": true, "/runbooks": false,
		auth.MCPPath: false, auth.AlertmanagerPath: false,
		route: false, "/": true, "/console/app.js": true, "/console": false, "/index.html": false,
		auth.OpenAPIPath: true, "/openapi.yaml/": false, "/v1/nodes": false,
	} {
		if got := auth.Public(p); got != want {
			t.Errorf("Public(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	f, err := auth.OpenFile("testdata/tokens.yaml", auth.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mapped := &x509.Certificate{Subject: pkix.Name{CommonName: "router-2.llmdiag.internal"}}
	unmapped := &x509.Certificate{Subject: pkix.Name{CommonName: "router-3"}}
	verified := func(c *x509.Certificate) *tls.ConnectionState {
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	for _, c := range []struct {
		name    string
		a       auth.Authenticator
		header  []string
		tls     *tls.ConnectionState
		want    auth.Principal
		wantErr error
	}{
		{"nothing", auth.Authenticator{Tokens: f}, nil, nil, auth.Principal{}, auth.ErrNoCredentials},
		{"token", auth.Authenticator{Tokens: f}, []string{"Bearer " + readerTok}, nil, auth.Principal{Name: "grafana", Role: "reader"}, nil},
		{"scheme case", auth.Authenticator{Tokens: f}, []string{"bearer " + routerTok}, nil, auth.Principal{Name: "router-eu-1", Role: "router"}, nil},
		{"unknown token", auth.Authenticator{Tokens: f}, []string{"Bearer " + strings.Repeat("z", 40)}, nil, auth.Principal{}, auth.ErrUnknownToken},
		{"basic", auth.Authenticator{Tokens: f}, []string{"Basic dXNlcjpwYXNz"}, nil, auth.Principal{}, auth.ErrMalformed},
		{"empty bearer", auth.Authenticator{Tokens: f}, []string{"Bearer "}, nil, auth.Principal{}, auth.ErrMalformed},
		{"two headers", auth.Authenticator{Tokens: f}, []string{"Bearer " + readerTok, "Bearer " + adminTok}, nil, auth.Principal{}, auth.ErrMalformed},
		{"no tokens file", auth.Authenticator{}, []string{"Bearer " + readerTok}, nil, auth.Principal{}, auth.ErrUnknownToken},
		{"mapped cert", auth.Authenticator{Tokens: f}, nil, verified(mapped), auth.Principal{Name: "router-2.llmdiag.internal", Role: "router"}, nil},
		{"unmapped cert", auth.Authenticator{Tokens: f}, nil, verified(unmapped), auth.Principal{Name: "router-3"}, nil},
		{"cert, no file", auth.Authenticator{UnmappedClientRole: auth.RoleAdmin}, nil, verified(unmapped), auth.Principal{Name: "router-3", Role: "admin"}, nil},
		{"unverified cert", auth.Authenticator{Tokens: f}, nil, &tls.ConnectionState{PeerCertificates: []*x509.Certificate{mapped}}, auth.Principal{}, auth.ErrNoCredentials},
		{"cert and bad token", auth.Authenticator{Tokens: f}, []string{"Bearer " + strings.Repeat("z", 40)}, verified(mapped), auth.Principal{}, auth.ErrUnknownToken},
		{"cert and token", auth.Authenticator{Tokens: f}, []string{"Bearer " + readerTok}, verified(mapped), auth.Principal{Name: "grafana", Role: "reader"}, nil},
	} {
		r := httptest.NewRequest("POST", "/x", nil)
		for _, h := range c.header {
			r.Header.Add("Authorization", h)
		}
		r.TLS = c.tls
		got, err := c.a.Authenticate(r)
		if got != c.want || !errors.Is(err, c.wantErr) {
			t.Errorf("%s: got %v, %v; want %v, %v", c.name, got, err, c.want, c.wantErr)
		}
	}
}

func TestContext(t *testing.T) {
	if _, ok := auth.FromContext(context.Background()); ok {
		t.Fatal("principal in an empty context")
	}
	p := auth.Principal{Name: "n", Role: auth.RoleRouter}
	if got, ok := auth.FromContext(auth.NewContext(context.Background(), p)); !ok || got != p {
		t.Fatalf("got %v %v", got, ok)
	}
}

// TestFileConcurrent: lookups from many goroutines while the file is
// rewritten and re-read (run with -race).
func TestFileConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	write := func(tok string) {
		role := map[string]string{readerTok: "reader", adminTok: "admin"}[tok]
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte("tokens:\n  - {name: "+role+"-holder, role: "+role+", token: "+tok+"}\n"), 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Error(err)
		}
	}
	write(readerTok)
	clk := testkit.NewClock(time.Unix(1e9, 0))
	f, err := auth.OpenFile(path, auth.FileOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				// Whichever file is in force, a token maps to its own entry.
				if p, ok := f.Token(readerTok); ok && p != (auth.Principal{Name: "reader-holder", Role: auth.RoleReader}) {
					t.Errorf("reader token: %v", p)
					return
				}
				if p, ok := f.Token(adminTok); ok && p != (auth.Principal{Name: "admin-holder", Role: auth.RoleAdmin}) {
					t.Errorf("admin token: %v", p)
					return
				}
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			write(adminTok)
		} else {
			write(readerTok)
		}
		clk.Add(time.Second)
	}
	wg.Wait()
	clk.Add(time.Second)
	if _, ok := f.Token(readerTok); !ok { // the last write
		t.Error("last file not in force")
	}
	if _, ok := f.Token(adminTok); ok {
		t.Error("admin token still in force")
	}
}

// TestFileReloaded: Reloaded's context ends at a reload, after the new
// tokens are in force, and not at a look that finds the file unchanged or
// unusable; Run reloads with no lookup to prompt it.
func TestFileReloaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	write := func(yaml string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("tokens:\n  - {name: a, role: reader, token: " + readerTok + "}\n")
	clk := testkit.NewClock(time.Unix(1e9, 0))
	f, err := auth.OpenFile(path, auth.FileOptions{Now: clk.Now, CheckEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gen := f.Reloaded()
	clk.Add(time.Second)
	f.Check()
	if gen.Err() != nil || f.Reloaded() != gen {
		t.Fatal("Reloaded ended at a look that found the file unchanged")
	}
	write("tokens:\n  - {name: a, role: sudo, token: " + readerTok + "}\n")
	clk.Add(time.Second)
	f.Check()
	if gen.Err() != nil {
		t.Fatal("Reloaded ended at a file that cannot be used")
	}
	write("tokens:\n  - {name: b, role: router, token: " + routerTok + "}\n")
	f.Check()
	if gen.Err() != nil {
		t.Fatal("Reloaded ended before CheckEvery passed")
	}
	clk.Add(time.Second)
	inForce := make(chan bool, 1)
	stop := context.AfterFunc(gen, func() { _, ok := f.Token(routerTok); inForce <- ok })
	defer stop()
	f.Check()
	if gen.Err() == nil {
		t.Fatal("Reloaded did not end at the reload")
	}
	select {
	case ok := <-inForce:
		if !ok {
			t.Fatal("new tokens not in force when Reloaded ended")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("AfterFunc on Reloaded never ran")
	}
	next := f.Reloaded()
	if next == gen || next.Err() != nil {
		t.Fatal("no fresh Reloaded after the reload")
	}

	// Run: the file's own ticker, real time.
	rf, err := auth.OpenFile(path, auth.FileOptions{CheckEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rf.Run(ctx); close(done) }()
	gen = rf.Reloaded()
	write("tokens:\n  - {name: c, role: admin, token: " + adminTok + "}\n")
	select {
	case <-gen.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not reload the changed file")
	}
	cancel()
	<-done
}
