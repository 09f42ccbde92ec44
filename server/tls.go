package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/llmdiag/llmdiag/tlsreload"
)

// TLSOptions say how to serve over TLS.
type TLSOptions struct {
	// CertFile and KeyFile hold the server's certificate (with any
	// intermediates after it) and its key, PEM-encoded. They are read again
	// when they change (see package tlsreload): the next handshake presents
	// the new certificate, without a restart.
	CertFile, KeyFile string
	// ClientCAFile, when set, holds the CA certificates client certificates
	// are verified against (mTLS); it is read again when it changes. A
	// verified chain reaches handlers as http.Request.TLS.VerifiedChains.
	ClientCAFile string
	// RequireClientCert refuses, in the handshake, a client that presents
	// no certificate. Without it a client may connect without one (to
	// authenticate with a bearer token instead), but one that presents a
	// certificate the CAs do not verify fails the handshake either way.
	RequireClientCert bool
	// ReloadEvery is the least time between two looks at the files
	// (default tlsreload.DefaultEvery).
	ReloadEvery time.Duration
	// Now is the clock of the reloads (default time.Now).
	Now func() time.Time
	// Log receives reloads and files that failed to load (default:
	// discarded).
	Log *slog.Logger
}

// NewTLSConfig returns the server's TLS configuration: TLS 1.2 or later,
// HTTP/2 or HTTP/1.1 negotiated by ALPN, the certificate reloaded from its
// files, and with ClientCAFile client certificates verified. It fails if
// the files do not load now.
func NewTLSConfig(o TLSOptions) (*tls.Config, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("tls: a certificate and a key file are both needed")
	}
	if o.RequireClientCert && o.ClientCAFile == "" {
		return nil, errors.New("tls: requiring client certificates needs a client CA file to verify them with")
	}
	ro := tlsreload.Options{Every: o.ReloadEvery, Now: o.Now, Log: o.Log}
	cert, err := tlsreload.NewCertificate(o.CertFile, o.KeyFile, ro)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: cert.GetCertificate,
	}
	if o.ClientCAFile == "" {
		return base, nil
	}
	pool, err := tlsreload.NewPool(o.ClientCAFile, ro)
	if err != nil {
		return nil, err
	}
	auth := tls.VerifyClientCertIfGiven
	if o.RequireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	pc := &perPool{base: base, auth: auth, pool: pool}
	cfg := base.Clone()
	cfg.ClientAuth, cfg.ClientCAs = auth, pool.Current()
	// tls.Config.ClientCAs is read at each handshake from the Config in
	// use, so a reloaded pool needs a Config of its own: GetConfigForClient
	// hands out one per pool (the Config above only describes the start).
	cfg.GetConfigForClient = pc.config
	return cfg, nil
}

// perPool makes the Config of each client CA pool in turn.
type perPool struct {
	base *tls.Config
	auth tls.ClientAuthType
	pool *tlsreload.Pool

	mu   sync.Mutex
	made *x509.CertPool // the pool cfg was made for
	cfg  *tls.Config
}

func (p *perPool) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	cur := p.pool.Current()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg == nil || p.made != cur {
		cfg := p.base.Clone()
		cfg.ClientAuth, cfg.ClientCAs = p.auth, cur
		p.made, p.cfg = cur, cfg
	}
	return p.cfg, nil
}

// ServeTLS is Serve over TLS with cfg (see NewTLSConfig): HTTP/2 when the
// client offers h2 by ALPN, HTTP/1.1 otherwise, and never cleartext HTTP/2
// (h2c), which only Serve speaks. opts are as Serve's.
func ServeTLS(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, grace time.Duration, cfg *tls.Config, opts ...ServeOptions) error {
	if cfg == nil {
		return errors.New("ServeTLS: no TLS configuration")
	}
	return serve(ctx, ln, h, log, grace, cfg, opts)
}

// protocols are the HTTP versions served: with TLS, HTTP/1.1 and HTTP/2 by
// ALPN; without, HTTP/1.1 and cleartext HTTP/2 (h2c, which gRPC clients
// speak to a plaintext port).
func protocols(secure bool) *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	if secure {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &p
}
