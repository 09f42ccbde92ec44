package prom

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/llmdiag/llmdiag/metrics"
)

// Config configures a Source. Zero values take the defaults shown.
type Config struct {
	// URL of the Prometheus server (or any server of its HTTP API: Thanos,
	// Mimir, VictoriaMetrics), e.g. http://prometheus:9090.
	URL string
	// BearerTokenFile holds a bearer token, read anew for every request so
	// that a rotated token is picked up.
	BearerTokenFile string
	// BasicAuthUser and BasicAuthPasswordFile set basic authentication (the
	// password is read anew for every request). Not with BearerTokenFile.
	BasicAuthUser         string
	BasicAuthPasswordFile string
	// Headers are added to every request (X-Scope-OrgID for Mimir, …).
	// Authorization may not be set here together with BearerTokenFile or
	// basic authentication.
	Headers map[string]string
	TLS     TLSConfig
	// Timeout bounds every query (default 10s); a context deadline closer
	// than that bounds it too, less a tenth kept for assembling what
	// arrived (see the package doc). The bound is also sent to Prometheus
	// as the query's timeout.
	Timeout time.Duration
	// Concurrency bounds the queries in flight (default 8).
	Concurrency int
	// NodeLabel identifies a node (default "instance").
	NodeLabel string
	// ModelLabels may carry the served model, in order of preference, after
	// the engine's own label (default model_name, model, name).
	ModelLabels []string
	// StaleAfter marks metrics stale when the node's last scrape is older
	// than this at the evaluation time (default 30s).
	StaleAfter time.Duration
	// Quantiles reported in distributions (default metrics.DefaultQuantiles).
	Quantiles []float64
	// MaxBodyBytes bounds one response (default 512 MiB: a bucket query
	// of 10,000 vLLM nodes answers ~12 MB).
	MaxBodyBytes int64
	// Lookback is how long a node that stopped reporting is still listed,
	// as down, and how recently a job must have served an engine's families
	// for its targets with up == 0 to be listed down (default 10m;
	// negative: vanished nodes are not listed, and only jobs serving the
	// families now count).
	Lookback time.Duration
}

// TLSConfig configures TLS to Prometheus.
type TLSConfig struct {
	// CAFile verifies the server instead of the system roots.
	CAFile string
	// CertFile and KeyFile are a client certificate, both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name the certificate is checked against.
	ServerName string
	// InsecureSkipVerify skips certificate verification.
	InsecureSkipVerify bool
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.NodeLabel == "" {
		c.NodeLabel = "instance"
	}
	if c.ModelLabels == nil {
		c.ModelLabels = []string{"model_name", "model", "name"}
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 30 * time.Second
	}
	if len(c.Quantiles) == 0 {
		c.Quantiles = metrics.DefaultQuantiles
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 512 << 20
	}
	if c.Lookback == 0 {
		c.Lookback = 10 * time.Minute
	}
}

func (c *Config) validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		return fmt.Errorf("prometheus url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("prometheus url %q: want an http or https url", c.URL)
	case u.Host == "":
		return fmt.Errorf("prometheus url %q: no host", c.URL)
	case c.BearerTokenFile != "" && (c.BasicAuthUser != "" || c.BasicAuthPasswordFile != ""):
		return errors.New("bearer token and basic authentication are exclusive")
	case c.BasicAuthPasswordFile != "" && c.BasicAuthUser == "":
		return errors.New("basic authentication password file without user")
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return errors.New("tls: client certificate and key go together")
	}
	if !validLabelName(c.NodeLabel) {
		return fmt.Errorf("node label %q: not a valid label name", c.NodeLabel)
	}
	for _, l := range c.ModelLabels {
		if !validLabelName(l) {
			return fmt.Errorf("model label %q: not a valid label name", l)
		}
	}
	for _, q := range c.Quantiles {
		if !(q > 0 && q < 1) {
			return fmt.Errorf("quantile %v: want one in (0, 1)", q)
		}
	}
	for k, v := range c.Headers {
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			return fmt.Errorf("header %q: invalid name", k)
		case !httpguts.ValidHeaderFieldValue(v):
			return fmt.Errorf("header %s: invalid value", k)
		case textproto.CanonicalMIMEHeaderKey(k) == "Authorization" && (c.BearerTokenFile != "" || c.BasicAuthUser != ""):
			return fmt.Errorf("header %s: set together with bearer token or basic authentication", k)
		}
	}
	return nil
}

// transport returns the round tripper of cfg: TLS, then authentication and
// headers on every request.
func transport(cfg Config) (http.RoundTripper, error) {
	tc := &tls.Config{
		ServerName:         cfg.TLS.ServerName,
		InsecureSkipVerify: cfg.TLS.InsecureSkipVerify, //nolint:gosec // the operator's explicit choice
		MinVersion:         tls.VersionTLS12,
	}
	if cfg.TLS.CAFile != "" {
		pem, err := os.ReadFile(cfg.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca %s: no certificate found", cfg.TLS.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tc
	base.MaxIdleConnsPerHost = max(base.MaxIdleConnsPerHost, cfg.Concurrency)
	a := &authTransport{next: base, headers: http.Header{}, tokenFile: cfg.BearerTokenFile,
		user: cfg.BasicAuthUser, passwordFile: cfg.BasicAuthPasswordFile}
	for k, v := range cfg.Headers {
		a.headers.Set(k, v)
	}
	// Fail at start, not at the first refresh, when a secret is unreadable.
	if _, err := a.secret(a.tokenFile); err != nil {
		return nil, err
	}
	if _, err := a.secret(a.passwordFile); err != nil {
		return nil, err
	}
	return a, nil
}

// authTransport adds headers and credentials to every request.
type authTransport struct {
	next               http.RoundTripper
	headers            http.Header
	tokenFile          string
	user, passwordFile string
}

// secret reads a credential file, trimmed of surrounding white space; ""
// for no file.
func (a *authTransport) secret(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read credentials: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (a *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not modify the caller's request.
	req = req.Clone(req.Context())
	for k, vs := range a.headers {
		req.Header[k] = vs
	}
	switch {
	case a.tokenFile != "":
		tok, err := a.secret(a.tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case a.user != "":
		pw, err := a.secret(a.passwordFile)
		if err != nil {
			return nil, err
		}
		req.SetBasicAuth(a.user, pw)
	}
	return a.next.RoundTrip(req)
}
