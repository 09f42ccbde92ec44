package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// WithCA verifies the service's certificate against pool instead of the
// system's roots (for https:// URLs).
func WithCA(pool *x509.CertPool) Option { return func(o *options) { o.rootCAs = pool } }

// WithClientCertificate presents cert to a service that asks for one
// (mTLS; for https:// URLs).
func WithClientCertificate(cert tls.Certificate) Option {
	return func(o *options) { o.clientCerts = append(o.clientCerts, cert) }
}

// TLSFiles are the PEM files of a TLS client. Empty fields are left out.
type TLSFiles struct {
	// CAFile holds the CA certificates to verify the service with
	// (default: the system's roots).
	CAFile string
	// CertFile and KeyFile hold a client certificate and its key, for a
	// service that verifies client certificates (mTLS).
	CertFile, KeyFile string
}

// Options loads the files into the options that use them: WithCA and
// WithClientCertificate.
func (f TLSFiles) Options() ([]Option, error) {
	var opts []Option
	if f.CAFile != "" {
		b, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", f.CAFile)
		}
		opts = append(opts, WithCA(pool))
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	if f.CertFile != "" {
		c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		opts = append(opts, WithClientCertificate(c))
	}
	return opts, nil
}

// tls is the TLS configuration of o: WithTLSConfig's (copied), with
// WithCA's pool and WithClientCertificate's certificates on top; nil when
// no TLS option was given.
func (o *options) tls() *tls.Config {
	if o.tlsConfig == nil && o.rootCAs == nil && len(o.clientCerts) == 0 {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsConfig != nil {
		cfg = o.tlsConfig.Clone()
	}
	if o.rootCAs != nil {
		cfg.RootCAs = o.rootCAs
	}
	if len(o.clientCerts) > 0 {
		certs := append(slices.Clone(cfg.Certificates), o.clientCerts...)
		cfg.Certificates = nil
		cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pickClientCertificate(cri, certs), nil
		}
	}
	return cfg
}

// pickClientCertificate returns the first of certs the service accepts, or
// failing that the first of them. Go's default sends no certificate at all
// when none was issued by a CA the service names, and the call then fails
// far from its cause (Unauthenticated, or a handshake refused for a
// missing certificate); sending it anyway makes the service's answer say
// what is wrong with it (unknown certificate authority).
func pickClientCertificate(cri *tls.CertificateRequestInfo, certs []tls.Certificate) *tls.Certificate {
	for i := range certs {
		if cri.SupportsCertificate(&certs[i]) == nil {
			return &certs[i]
		}
	}
	return &certs[0]
}

// Config is the TLS configuration the files make, as New would use it; nil
// when no file is named.
func (f TLSFiles) Config() (*tls.Config, error) {
	opts, err := f.Options()
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o.tls(), nil
}
