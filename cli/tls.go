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

// serveTLSFlags are serve's TLS flags.
type serveTLSFlags struct {
	cert, key, clientCA *string
	clientCertRequired  *bool
}

func tlsServeFlags(fs *flag.FlagSet) serveTLSFlags {
	return serveTLSFlags{
		cert:               fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM, intermediates after it); re-read when the file changes, no restart needed. HTTP/2 is negotiated by ALPN; cleartext HTTP/2 (h2c) is then off"),
		key:                fs.String("tls-key", "", "private key of --tls-cert (PEM); re-read with it"),
		clientCA:           fs.String("tls-client-ca", "", "verify client certificates (mTLS) against the CAs in this file (PEM; re-read when it changes). A client may still connect without a certificate (to use a bearer token) unless --tls-client-cert-required; an untrusted certificate fails the handshake"),
		clientCertRequired: fs.Bool("tls-client-cert-required", false, "with --tls-client-ca: refuse, in the handshake, clients that present no certificate"),
	}
}

// config returns the TLS configuration the flags ask for, nil for plaintext.
func (f serveTLSFlags) config(log *slog.Logger) (*tls.Config, error) {
	switch {
	case *f.cert == "" && *f.key == "" && *f.clientCA == "" && !*f.clientCertRequired:
		return nil, nil
	case *f.cert == "" || *f.key == "":
		return nil, usageError{errors.New("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")}
	case *f.clientCertRequired && *f.clientCA == "":
		return nil, usageError{errors.New("--tls-client-cert-required needs --tls-client-ca to verify the certificates with")}
	}
	cfg, err := server.NewTLSConfig(server.TLSOptions{
		CertFile: *f.cert, KeyFile: *f.key, ClientCAFile: *f.clientCA, RequireClientCert: *f.clientCertRequired, Log: log,
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
