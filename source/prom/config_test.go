package prom

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigValidate(t *testing.T) {
	token := writeFile(t, "token", "s3cret\n")
	tests := []struct {
		name string
		cfg  Config
		err  string // substring; "" for valid
	}{
		{name: "minimal", cfg: Config{URL: "http://prometheus:9090"}},
		{name: "path prefix", cfg: Config{URL: "https://example.org/prometheus", BearerTokenFile: token}},
		{name: "no url", cfg: Config{}, err: "want an http or https url"},
		{name: "bad scheme", cfg: Config{URL: "ftp://x"}, err: "want an http or https url"},
		{name: "no host", cfg: Config{URL: "http://"}, err: "no host"},
		{name: "token and basic", cfg: Config{URL: "http://x", BearerTokenFile: token, BasicAuthUser: "u"}, err: "exclusive"},
		{name: "password without user", cfg: Config{URL: "http://x", BasicAuthPasswordFile: token}, err: "without user"},
		{name: "cert without key", cfg: Config{URL: "http://x", TLS: TLSConfig{CertFile: "c"}}, err: "go together"},
		{name: "bad node label", cfg: Config{URL: "http://x", NodeLabel: "in stance"}, err: "node label"},
		{name: "bad model label", cfg: Config{URL: "http://x", ModelLabels: []string{"model-name"}}, err: "model label"},
		{name: "bad quantile", cfg: Config{URL: "http://x", Quantiles: []float64{0.5, 1}}, err: "quantile"},
		{name: "bad header", cfg: Config{URL: "http://x", Headers: map[string]string{"X-A": "a\nb"}}, err: "invalid value"},
		{name: "authorization and a url password", cfg: Config{URL: "http://u:p@x", Headers: map[string]string{"Authorization": "x"}}, err: "together"},
		{name: "url password and token", cfg: Config{URL: "http://u:p@x", BearerTokenFile: token}, err: "credentials in the url"},
		{name: "authorization twice", cfg: Config{URL: "http://x", BearerTokenFile: token, Headers: map[string]string{"authorization": "x"}}, err: "together"},
		{name: "missing token file", cfg: Config{URL: "http://x", BearerTokenFile: "/nonexistent"}, err: "read credentials"},
		{name: "missing ca", cfg: Config{URL: "http://x", TLS: TLSConfig{CAFile: "/nonexistent"}}, err: "tls ca"},
		{name: "ca without certificate", cfg: Config{URL: "http://x", TLS: TLSConfig{CAFile: token}}, err: "no certificate"},
		{name: "small in-flight limit", cfg: Config{URL: "http://x", MaxInFlight: 2}},
		{name: "no slot left for refreshes", cfg: Config{URL: "http://x", MaxInFlight: 4, OnDemandInFlight: 4}, err: "refreshes keep slots"},
		{name: "one slot in all", cfg: Config{URL: "http://x", MaxInFlight: 1}, err: "refreshes keep slots"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, quietLog(), time.Now)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("New: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// TestAuthAndTLS: credentials (read anew per request), headers and a
// private CA reach a TLS Prometheus.
func TestAuthAndTLS(t *testing.T) {
	type got struct{ auth, tenant string }
	seen := make(chan got, 1000)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- got{r.Header.Get("Authorization"), r.Header.Get("X-Scope-OrgID")}
		w.Write(emptyVector.Body)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the unknown-CA case fails handshakes
	srv.StartTLS()
	defer srv.Close()
	ca := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	token := writeFile(t, "token", "first\n")
	password := writeFile(t, "password", "pw")

	tests := []struct {
		name     string
		cfg      Config
		rotate   func()
		want     string
		wantNext string
	}{
		{
			name:   "bearer token, rotated",
			cfg:    Config{BearerTokenFile: token},
			rotate: func() { os.WriteFile(token, []byte("second"), 0o600) },
			want:   "Bearer first", wantNext: "Bearer second",
		},
		{
			name: "basic",
			cfg:  Config{BasicAuthUser: "llmdiag", BasicAuthPasswordFile: password},
			want: "Basic bGxtZGlhZzpwdw==", wantNext: "Basic bGxtZGlhZzpwdw==",
		},
		{name: "header only", cfg: Config{Headers: map[string]string{"Authorization": "Custom x"}}, want: "Custom x", wantNext: "Custom x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL = srv.URL
			cfg.TLS = TLSConfig{CAFile: ca, ServerName: "example.com"}
			if cfg.Headers == nil {
				cfg.Headers = map[string]string{}
			}
			cfg.Headers["X-Scope-OrgID"] = "tenant-1"
			s, err := New(cfg, quietLog(), func() time.Time { return testNow })
			if err != nil {
				t.Fatal(err)
			}
			check := func(want string) {
				t.Helper()
				if _, err := s.Refresh(context.Background(), "5m"); err != nil {
					t.Fatal(err)
				}
				n := s.QueriesLastRefresh()
				for range n {
					g := <-seen
					if g.auth != want || g.tenant != "tenant-1" {
						t.Fatalf("request had Authorization %q X-Scope-OrgID %q, want %q tenant-1", g.auth, g.tenant, want)
					}
				}
			}
			check(tc.want)
			if tc.rotate != nil {
				tc.rotate()
			}
			check(tc.wantNext)
		})
	}
	t.Run("unknown CA", func(t *testing.T) {
		s, err := New(Config{URL: srv.URL}, quietLog(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Refresh(context.Background(), "5m"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("err = %v, want a certificate error", err)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		s, err := New(Config{URL: srv.URL, TLS: TLSConfig{InsecureSkipVerify: true}}, quietLog(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Refresh(context.Background(), "5m"); err != nil {
			t.Error(err)
		}
		for len(seen) > 0 {
			<-seen
		}
	})
}
