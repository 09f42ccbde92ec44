package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/server"
)

// serveTLSConfig is serve's TLS configuration.
type serveTLSConfig struct {
	cert, key, clientCA string
	clientCertRequired  bool
}

// register defines the TLS flags on fs, filling f.
func (f *serveTLSConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "serve HTTPS with this certificate (PEM, intermediates after it); re-read when the file changes, no restart needed. HTTP/2 is negotiated by ALPN; cleartext HTTP/2 (h2c) is then off")
	fs.StringVar(&f.key, "tls-key", "", "private key of --tls-cert (PEM); re-read with it")
	fs.StringVar(&f.clientCA, "tls-client-ca", "", "verify client certificates (mTLS) against the CAs in this file (PEM; re-read when it changes). A client may still connect without a certificate (to use a bearer token) unless --tls-client-cert-required; an untrusted certificate fails the handshake")
	fs.BoolVar(&f.clientCertRequired, "tls-client-cert-required", false, "with --tls-client-ca: refuse, in the handshake, clients that present no certificate")
}

// on reports whether serve serves TLS.
func (f serveTLSConfig) on() bool {
	return f.cert != "" || f.key != "" || f.clientCA != "" || f.clientCertRequired
}

// check refuses TLS flags that do not go together.
func (f serveTLSConfig) check() error {
	switch {
	case !f.on():
		return nil
	case f.cert == "" || f.key == "":
		return errors.New("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")
	case f.clientCertRequired && f.clientCA == "":
		return errors.New("--tls-client-cert-required needs --tls-client-ca to verify the certificates with")
	}
	return nil
}

// config returns the TLS configuration asked for (checked by check), nil
// for plaintext.
func (f serveTLSConfig) config(log *slog.Logger) (*tls.Config, error) {
	if !f.on() {
		return nil, nil
	}
	cfg, err := server.NewTLSConfig(server.TLSOptions{
		CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.clientCA, RequireClientCert: f.clientCertRequired, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key, --tls-client-ca: %w", err)
	}
	return cfg, nil
}

// scheme is the URL scheme the service is reached by.
func scheme(cfg *tls.Config) string {
	if cfg != nil {
		return "https"
	}
	return "http"
}

// serveMaybeTLS serves h on ln over TLS with cfg, or in plaintext when cfg
// is nil.
func serveMaybeTLS(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, grace time.Duration, cfg *tls.Config, opts server.ServeOptions) error {
	if cfg != nil {
		return server.ServeTLS(ctx, ln, h, log, grace, cfg, opts)
	}
	return server.Serve(ctx, ln, h, log, grace, opts)
}

// tlsOptions are the client options of --ca, --cert and --key.
func (c *clientFlags) tlsOptions() ([]client.Option, error) {
	f := client.TLSFiles{CAFile: c.ca, CertFile: c.cert, KeyFile: c.key}
	if f == (client.TLSFiles{}) {
		return nil, nil
	}
	opts, err := f.Options()
	if err != nil {
		return nil, usageError{fmt.Errorf("--ca, --cert, --key: %w", err)}
	}
	return opts, nil
}
