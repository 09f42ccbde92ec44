package prom

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/metrics"
)

// DefaultNodeLabel is the label that identifies a node when none is
// configured: Prometheus's own target label. serve's --node-label, and
// the rules and dashboard written for it, default to it.
const DefaultNodeLabel = "instance"

// DefaultModelLabels are the labels that may carry the served model, in
// order of preference, when none are configured (serve's and rules'
// --model-label).
func DefaultModelLabels() []string { return []string{"model_name", "model", "name"} }

// Config configures a Source. Zero values take the defaults shown.
type Config struct {
	// URL of the Prometheus server (or any server of its HTTP API: Thanos,
	// Mimir, VictoriaMetrics), e.g. http://prometheus:9090. A user and
	// password in it are basic authentication, as with BasicAuthUser (not
	// with it or BearerTokenFile); messages show the URL redacted.
	//
	// Credentials and Headers go to this URL's scheme, host and port only:
	// a redirect elsewhere is refused (the query fails naming it), one to
	// the same place is followed.
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
	// MaxInFlight bounds the queries to Prometheus in flight at once,
	// refreshes and on-demand windows together (default 12).
	MaxInFlight int
	// OnDemandInFlight bounds, among those, the queries of on-demand windows
	// (Source.Window): refreshes always have MaxInFlight − OnDemandInFlight
	// slots no on-demand query can take (default 4, or a third of a smaller
	// MaxInFlight; less than MaxInFlight).
	OnDemandInFlight int
	// Concurrency is how many queries a refresh sends at once (default
	// MaxInFlight − OnDemandInFlight).
	Concurrency int
	// WindowCacheBytes bounds the fleet-wide on-demand windows kept for
	// reuse (default 64 MiB; about 2.5 KB a node and window).
	WindowCacheBytes int64
	// WindowTimeout bounds the reading of one fleet-wide on-demand window,
	// which goes on when the request that started it gives up, for the
	// others waiting on it (default 1m).
	WindowTimeout time.Duration
	// NodeLabel identifies a node (default DefaultNodeLabel).
	NodeLabel string
	// DCGMJoin, when set, reads the NVIDIA DCGM exporter's series
	// (DCGM_FI_*) at every refresh, one query, and joins each GPU to a
	// node by these labels, tried in order (for example Hostname, pod,
	// instance): to the one node whose id, or whose id's host, is the
	// label's value or its host (dcgm.go). Empty: no GPU figures.
	DCGMJoin []string
	// DCGMPods are the pods whose GPUs a node's are, by node id (the
	// fleet file's pod and namespace labels, engine.NodePod): where a
	// join label's value names several nodes, as a host serving two
	// engines does, a series joins the one whose pod it carries (else the
	// one not in DCGMPods); a node with a pod joins only its pod's
	// series. A node not in it takes every series joined to it.
	DCGMPods map[string]engine.DCGMPod
	// ModelLabels may carry the served model, in order of preference, after
	// the engine's own label (default DefaultModelLabels).
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
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 12
	}
	if c.OnDemandInFlight <= 0 {
		c.OnDemandInFlight = max(1, min(4, c.MaxInFlight/3))
	}
	if c.Concurrency <= 0 {
		c.Concurrency = max(1, c.MaxInFlight-c.OnDemandInFlight)
	}
	if c.WindowCacheBytes <= 0 {
		c.WindowCacheBytes = 64 << 20
	}
	if c.WindowTimeout <= 0 {
		c.WindowTimeout = time.Minute
	}
	if c.NodeLabel == "" {
		c.NodeLabel = DefaultNodeLabel
	}
	if c.ModelLabels == nil {
		c.ModelLabels = DefaultModelLabels()
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
		return fmt.Errorf("prometheus url: %s", redact.Text(err.Error()))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("prometheus url %q: want an http or https url", redact.URL(c.URL))
	case u.Host == "":
		return fmt.Errorf("prometheus url %q: no host", redact.URL(c.URL))
	case u.User != nil && (c.BearerTokenFile != "" || c.BasicAuthUser != ""):
		return fmt.Errorf("prometheus url %q: credentials in the url and a bearer token or basic-auth user too: give one", redact.URL(c.URL))
	case c.BearerTokenFile != "" && (c.BasicAuthUser != "" || c.BasicAuthPasswordFile != ""):
		return errors.New("bearer token and basic authentication are exclusive")
	case c.BasicAuthPasswordFile != "" && c.BasicAuthUser == "":
		return errors.New("basic authentication password file without user")
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return errors.New("tls: client certificate and key go together")
	case c.OnDemandInFlight >= c.MaxInFlight:
		return fmt.Errorf("on-demand queries in flight (%d) must be fewer than all queries in flight (%d), so refreshes keep slots of their own", c.OnDemandInFlight, c.MaxInFlight)
	}
	if !validLabelName(c.NodeLabel) {
		return fmt.Errorf("node label %q: not a valid label name", c.NodeLabel)
	}
	for _, l := range c.ModelLabels {
		if !validLabelName(l) {
			return fmt.Errorf("model label %q: not a valid label name", l)
		}
	}
	for _, l := range c.DCGMJoin {
		if !validLabelName(l) {
			return fmt.Errorf("dcgm join label %q: not a valid label name", l)
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
		case textproto.CanonicalMIMEHeaderKey(k) == "Authorization" && (c.BearerTokenFile != "" || c.BasicAuthUser != "" || u.User != nil):
			return fmt.Errorf("header %s: set together with bearer token or basic authentication", k)
		}
	}
	return nil
}

// transport returns the round tripper of cfg: TLS, then authentication and
// headers on every request to cfg.URL's origin; it refuses any other.
// cfg.URL must be valid and without userinfo (New moves it to user and
// password).
func transport(cfg Config, user, password string) (http.RoundTripper, error) {
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
	base.MaxIdleConnsPerHost = max(base.MaxIdleConnsPerHost, cfg.MaxInFlight)
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("prometheus url: %s", redact.Text(err.Error()))
	}
	a := &authTransport{next: base, origin: originOf(u), headers: http.Header{}, tokenFile: cfg.BearerTokenFile,
		user: cfg.BasicAuthUser, passwordFile: cfg.BasicAuthPasswordFile}
	if user != "" {
		a.user, a.password = user, password
	}
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

// authTransport adds headers and credentials to every request. It sits
// below http.Client's redirect handling, which copies headers set here to
// wherever a redirect leads: so it refuses requests to any origin but the
// configured one (and Source's client refuses such redirects first).
type authTransport struct {
	next      http.RoundTripper
	origin    origin
	headers   http.Header
	tokenFile string
	// user with password, or the one read from passwordFile.
	user, password, passwordFile string
}

// origin is where credentials may go: scheme, lower-case host name and
// port (the scheme's default when the URL has none).
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		o.port = map[string]string{"http": "80", "https": "443"}[o.scheme]
	}
	return o
}

func (o origin) String() string {
	return o.scheme + "://" + net.JoinHostPort(o.host, o.port)
}

// errOtherOrigin refuses a request or redirect to another origin.
func errOtherOrigin(to *url.URL, configured origin) error {
	return fmt.Errorf("refused to send prometheus credentials to %s: they go to the configured %s only (a redirect to another scheme, host or port is not followed)", originOf(to), configured)
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
	if originOf(req.URL) != a.origin {
		return nil, errOtherOrigin(req.URL, a.origin)
	}
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
		pw := a.password
		if a.passwordFile != "" {
			var err error
			if pw, err = a.secret(a.passwordFile); err != nil {
				return nil, err
			}
		}
		req.SetBasicAuth(a.user, pw)
	}
	return a.next.RoundTrip(req)
}
