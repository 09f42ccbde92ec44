package client_test

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/server"
)

// TestTLSFiles: the CLI's --ca, --cert and --key files become options
// that reach an mTLS service over every protocol; bad files are named.
func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca, clients := certtest.NewCA(t, "server CA"), certtest.NewCA(t, "client CA")
	caFile := ca.WriteFile(t, dir, "ca.pem")
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir, "server")
	clientCAFile := clients.WriteFile(t, dir, "clients.pem")
	cCert, cKey := clients.Client(t, "bot").WriteFiles(t, dir, "bot")
	cfg, err := server.NewTLSConfig(server.TLSOptions{CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCAFile, RequireClientCert: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Options{TLS: cfg})

	opts, err := client.TLSFiles{CAFile: caFile, CertFile: cCert, KeyFile: cKey}.Options()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []client.Protocol{client.ProtocolConnect, client.ProtocolConnectJSON, client.ProtocolGRPC, client.ProtocolGRPCWeb} {
		c, err := client.New(srv.URL, append(opts, client.WithProtocol(p))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{})); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		cancel()
	}
	// Without the client certificate the required mTLS refuses the call;
	// without the CA the server's certificate is not trusted.
	for name, opts := range map[string][]client.Option{
		"no client certificate": {client.WithCA(ca.Pool())},
		"no CA":                 {client.WithClientCertificate(clients.Client(t, "bot").TLS(t))},
		"WithTLSConfig's CA replaced by WithCA's": {client.WithTLSConfig(&tls.Config{RootCAs: ca.Pool()}), client.WithCA(clients.Pool()),
			client.WithClientCertificate(clients.Client(t, "bot").TLS(t))},
	} {
		c, err := client.New(srv.URL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{})); err == nil {
			t.Errorf("%s: the call succeeded", name)
		}
		cancel()
	}

	missing := filepath.Join(dir, "missing.pem")
	for name, f := range map[string]client.TLSFiles{
		"missing CA":        {CAFile: missing},
		"a key as CA":       {CAFile: cKey},
		"certificate alone": {CertFile: cCert},
		"key alone":         {KeyFile: cKey},
		"mismatched pair":   {CertFile: cCert, KeyFile: keyFile},
	} {
		if _, err := f.Options(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := client.New("http://127.0.0.1:1", opts...); err == nil {
		t.Error("TLS options accepted for an http:// URL")
	}
}
