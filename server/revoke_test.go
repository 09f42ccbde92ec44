package server_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// maxRevokeDelay is how soon after a reload a revoked stream must end.
const maxRevokeDelay = time.Second

// revokeFixture serves streamFleet behind Authorize with a tokens file
// whose reloads the test drives: the file's clock only moves when the test
// says, and reload calls File.Check, what serve's File.Run does each tick.
type revokeFixture struct {
	url  string
	opts []client.Option // how clients reach the server (TLS)
	st   *memory.Store
	path string
	file *auth.File
	now  atomic.Int64 // the file's clock, unix ns
}

func newRevokeFixture(t *testing.T, tokens string) *revokeFixture {
	t.Helper()
	return newRevokeFixtureTLS(t, tokens, nil)
}

// newRevokeFixtureTLS is newRevokeFixture served over TLS with cfg (nil:
// plaintext); f.opts must then carry the clients' TLS configuration.
func newRevokeFixtureTLS(t *testing.T, tokens string, cfg *tls.Config) *revokeFixture {
	t.Helper()
	f := &revokeFixture{path: filepath.Join(t.TempDir(), "tokens.yaml")}
	f.now.Store(time.Now().UnixNano())
	f.write(t, tokens)
	var err error
	f.file, err = auth.OpenFile(f.path, auth.FileOptions{Now: func() time.Time { return time.Unix(0, f.now.Load()) }, CheckEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.st = memory.New(memory.Options{FeedLen: 1 << 10}, "s")
	now := time.Now()
	for _, n := range streamFleet {
		rec := &store.Record{
			Node:    &llmdiagv1.Node{Id: n.id, Model: n.model, Status: llmdiagv1.Status_STATUS_OK, Routable: true, Labels: n.labels},
			Metrics: &llmdiagv1.NodeMetrics{Node: n.id, Model: n.model, Up: true},
		}
		if err := f.st.Put(context.Background(), rec, diagnose.Point{At: now}); err != nil {
			t.Fatal(err)
		}
	}
	a := &auth.Authenticator{Tokens: f.file}
	srv := servertest.Start(t, servertest.Options{
		Store:  f.st,
		Config: server.Config{StaleAfter: time.Hour, MinHeartbeat: time.Second},
		Wrap:   func(h http.Handler) http.Handler { return server.Authorize(h, a, nil) },
		TLS:    cfg,
	})
	f.url = srv.URL
	return f
}

// write replaces the tokens file, as a secret update does.
func (f *revokeFixture) write(t *testing.T, tokens string) {
	t.Helper()
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
}

// reload rewrites the file with tokens, then reloads it the way serve does
// (past CheckEvery, File.Check), and returns when the reload was done.
func (f *revokeFixture) reload(t *testing.T, tokens string) time.Time {
	t.Helper()
	before := f.file.Reloaded()
	f.write(t, tokens)
	f.now.Add(int64(2 * time.Second))
	f.file.Check()
	at := time.Now()
	if before.Err() == nil {
		t.Fatal("File.Check did not reload the changed file")
	}
	return at
}

// stream opens a StreamHealth stream with token over protocol and reads
// it up to SYNCED.
func (f *revokeFixture) stream(t *testing.T, ctx context.Context, protocol client.Protocol, token string, opts ...client.Option) *connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse] {
	t.Helper()
	if token != "" {
		opts = append(opts, client.WithBearerToken(token))
	}
	c, err := client.New(f.url, append(opts, client.WithProtocol(protocol))...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for s.Receive() {
		if s.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_SYNCED {
			return s
		}
	}
	t.Fatalf("stream ended before SYNCED: %v", s.Err())
	return nil
}

// ended waits for s to end and returns how long after since it did, and
// its error.
func ended(s *connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse], since time.Time) (time.Duration, error) {
	for s.Receive() {
	}
	return time.Since(since), s.Err()
}

// receivesChange puts a change of node b-1 and waits for s to carry it.
func (f *revokeFixture) receivesChange(t *testing.T, s *connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse], score float64) {
	t.Helper()
	if _, err := f.st.Publish(context.Background(), change("b-1", "beta", nil, llmdiagv1.Status_STATUS_OK, score)); err != nil {
		t.Fatal(err)
	}
	for s.Receive() {
		if m := s.Msg(); m.GetKind() == llmdiagv1.EventKind_EVENT_KIND_CHANGE && m.GetHealth().GetNode() == "b-1" {
			return
		}
	}
	t.Fatalf("stream of a principal still allowed ended: %v", s.Err())
}

const (
	revokeBoth     = "tokens:\n  - {name: router-a, role: router, token: " + routerToken + "}\n  - {name: router-b, role: router, token: " + adminToken + "}\n"
	revokeOnlyB    = "tokens:\n  - {name: router-b, role: router, token: " + adminToken + "}\n"
	revokeBReader  = "tokens:\n  - {name: router-b, role: reader, token: " + adminToken + "}\n"
	revokeTestWait = 30 * time.Second // bounds a hang; the delay itself is asserted apart
)

// TestRevokedTokenEndsStreams: removing a token from the file ends its open
// streams, within maxRevokeDelay of the reload, with Unauthenticated, and
// stops the client's Watch for good; another token's stream goes on; a
// role that no longer grants StreamHealth ends its streams with
// PermissionDenied.
func TestRevokedTokenEndsStreams(t *testing.T) {
	for _, protocol := range []client.Protocol{client.ProtocolConnect, client.ProtocolGRPC, client.ProtocolGRPCWeb} {
		t.Run(string(protocol), func(t *testing.T) {
			f := newRevokeFixture(t, revokeBoth)
			ctx, cancel := context.WithTimeout(context.Background(), revokeTestWait)
			defer cancel()
			a := f.stream(t, ctx, protocol, routerToken)
			b := f.stream(t, ctx, protocol, adminToken)
			c, err := client.New(f.url, client.WithBearerToken(routerToken), client.WithProtocol(protocol))
			if err != nil {
				t.Fatal(err)
			}
			view := c.Watch(ctx, client.Selector{})
			select {
			case <-view.Synced():
			case <-ctx.Done():
				t.Fatal("Watch never synced")
			}

			at := f.reload(t, revokeOnlyB)
			delay, err := ended(a, at)
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("revoked token's stream ended with %v, want Unauthenticated", err)
			}
			t.Logf("revoked token's stream ended %v after the reload", delay)
			if delay >= maxRevokeDelay {
				t.Errorf("revoked token's stream ended %v after the reload, want < %v", delay, maxRevokeDelay)
			}
			select {
			case <-view.Done():
			case <-ctx.Done():
				t.Fatal("Watch with a revoked token still running")
			}
			if connect.CodeOf(view.Err()) != connect.CodeUnauthenticated {
				t.Errorf("Watch stopped with %v, want Unauthenticated", view.Err())
			}
			f.receivesChange(t, b, 0.5)

			at = f.reload(t, revokeBReader)
			delay, err = ended(b, at)
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("downgraded token's stream ended with %v, want PermissionDenied", err)
			}
			t.Logf("downgraded token's stream ended %v after the reload", delay)
			if delay >= maxRevokeDelay {
				t.Errorf("downgraded token's stream ended %v after the reload, want < %v", delay, maxRevokeDelay)
			}
		})
	}
}

// TestReloadKeepsAllowedStreams: a reload that keeps a token and its grant
// (another token added) leaves its stream open, and it is checked again at
// the reload after.
func TestReloadKeepsAllowedStreams(t *testing.T) {
	f := newRevokeFixture(t, revokeOnlyB)
	ctx, cancel := context.WithTimeout(context.Background(), revokeTestWait)
	defer cancel()
	b := f.stream(t, ctx, client.ProtocolConnect, adminToken)
	f.reload(t, revokeBoth)
	f.receivesChange(t, b, 0.25)
	f.reload(t, revokeBoth+"  - {name: other, role: reader, token: "+readerToken+"}\n")
	f.receivesChange(t, b, 0.75)
	at := f.reload(t, revokeBReader)
	if _, err := ended(b, at); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("stream ended with %v after its third reload, want PermissionDenied", err)
	}
}

// TestRevokedCertificateEndsStreams: removing a client certificate's
// mapping ends its open streams within maxRevokeDelay of the reload with
// PermissionDenied (it is then a verified principal with no role, as a new
// call would find), while a token's stream over the same server goes on;
// the mapping's role downgraded does the same.
func TestRevokedCertificateEndsStreams(t *testing.T) {
	serverCA, clientCA := certtest.NewCA(t, "server CA"), certtest.NewCA(t, "client CA")
	cert := clientCA.Client(t, "router-cert").TLS(t)
	const mapped = "tokens:\n  - {name: router-b, role: router, token: " + adminToken + "}\nclients:\n  - {subject: \"spiffe://llmdiag.test/router-cert\", role: router}\n"
	for _, c := range []struct {
		name, tokens string
	}{
		{"mapping removed", revokeOnlyB},
		{"role downgraded", "tokens:\n  - {name: router-b, role: router, token: " + adminToken + "}\nclients:\n  - {subject: \"spiffe://llmdiag.test/router-cert\", role: reader}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newRevokeFixtureTLS(t, mapped, &tls.Config{
				Certificates: []tls.Certificate{serverCA.Server(t).TLS(t)},
				ClientAuth:   tls.VerifyClientCertIfGiven,
				ClientCAs:    clientCA.Pool(),
				NextProtos:   []string{"h2", "http/1.1"},
			})
			ctx, cancel := context.WithTimeout(context.Background(), revokeTestWait)
			defer cancel()
			trust := &tls.Config{RootCAs: serverCA.Pool()}
			withCert := trust.Clone()
			withCert.Certificates = []tls.Certificate{cert}
			a := f.stream(t, ctx, client.ProtocolGRPC, "", client.WithTLSConfig(withCert))
			b := f.stream(t, ctx, client.ProtocolGRPC, adminToken, client.WithTLSConfig(trust))
			at := f.reload(t, c.tokens)
			delay, err := ended(a, at)
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("certificate's stream ended with %v, want PermissionDenied", err)
			}
			t.Logf("certificate's stream ended %v after the reload", delay)
			if delay >= maxRevokeDelay {
				t.Errorf("certificate's stream ended %v after the reload, want < %v", delay, maxRevokeDelay)
			}
			f.receivesChange(t, b, 0.5)
		})
	}
}
