package tlsreload

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// DefaultEvery is how often, at most, the files are looked at.
const DefaultEvery = time.Second

// Options configure a Certificate or a Pool. Zero values take the defaults.
type Options struct {
	// Every is the least time between two looks at the files (default
	// DefaultEvery).
	Every time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives one line at the first load, one per reload and one per
	// change that failed to load (default: discarded).
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Certificate is a certificate and key read from a pair of PEM files and
// read again when they change.
type Certificate struct {
	w *watched[*tls.Certificate]
}

// NewCertificate loads the pair in certFile and keyFile; it fails if they
// do not load now.
func NewCertificate(certFile, keyFile string, o Options) (*Certificate, error) {
	parse := func(b [][]byte) (*tls.Certificate, error) {
		c, err := tls.X509KeyPair(b[0], b[1])
		if err != nil {
			return nil, err
		}
		return &c, nil
	}
	w, err := newWatched("certificate", []string{certFile, keyFile}, parse, describeCert, o)
	if err != nil {
		return nil, err
	}
	return &Certificate{w: w}, nil
}

// Current returns the certificate to present now, reading the files again
// if they changed and it is time to look.
func (c *Certificate) Current() *tls.Certificate { return c.w.get() }

// GetCertificate is Current in the shape of tls.Config.GetCertificate.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.Current(), nil
}

// GetClientCertificate is Current in the shape of
// tls.Config.GetClientCertificate.
func (c *Certificate) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.Current(), nil
}

func describeCert(c *tls.Certificate) []any {
	if c.Leaf == nil {
		return nil
	}
	return []any{"subject", c.Leaf.Subject.String(), "serial", c.Leaf.SerialNumber.Text(16), "not_after", c.Leaf.NotAfter}
}

// Pool is a pool of CA certificates read from one PEM file and read again
// when it changes.
type Pool struct {
	w *watched[*x509.CertPool]
}

// NewPool loads the CA certificates in file; it fails if the file does not
// load now or holds no certificate.
func NewPool(file string, o Options) (*Pool, error) {
	parse := func(b [][]byte) (*x509.CertPool, error) { return parsePool(file, b[0]) }
	w, err := newWatched("CA pool", []string{file}, parse, nil, o)
	if err != nil {
		return nil, err
	}
	return &Pool{w: w}, nil
}

// Current returns the pool to verify with now, reading the file again if it
// changed and it is time to look. The pool returned is not changed
// afterwards: a change yields a new pool.
func (p *Pool) Current() *x509.CertPool { return p.w.get() }

// LoadPool reads the PEM certificates in file into a new pool.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parsePool(file, b)
}

func parsePool(file string, b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return pool, nil
}

// watched is a value loaded from files and loaded again when they change.
type watched[T any] struct {
	what     string
	files    []string
	parse    func(contents [][]byte) (T, error)
	describe func(T) []any
	o        Options

	mu      sync.Mutex
	cur     T
	checked time.Time // last look at the files
	seen    []content // the files at the last attempt to load them
}

// content is what one file held, or why it could not be read.
type content struct {
	b   []byte
	err string
}

func newWatched[T any](what string, files []string, parse func([][]byte) (T, error), describe func(T) []any, o Options) (*watched[T], error) {
	w := &watched[T]{what: what, files: files, parse: parse, describe: describe, o: o.withDefaults()}
	w.seen = w.read()
	v, err := w.load(w.seen)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	w.cur, w.checked = v, w.o.Now()
	attrs := []any{"files", files}
	if describe != nil {
		attrs = append(attrs, describe(v)...)
	}
	w.o.Log.Info("tls: loaded "+what, attrs...)
	return w, nil
}

// get returns the current value, first loading the files again if it is
// time to look and they changed.
func (w *watched[T]) get() T {
	now := w.o.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := now.Sub(w.checked); d < w.o.Every && d >= 0 {
		return w.cur
	}
	w.checked = now
	got := w.read()
	if slices.EqualFunc(got, w.seen, func(a, b content) bool { return a.err == b.err && bytes.Equal(a.b, b.b) }) {
		return w.cur
	}
	w.seen = got
	v, err := w.load(got)
	if err != nil {
		// Logged once per change: seen now holds this change, so the
		// same contents are not tried (nor logged) again.
		w.o.Log.Error("tls: a changed "+w.what+" did not load; still serving the previous one", "files", w.files, "err", err)
		return w.cur
	}
	w.cur = v
	attrs := []any{"files", w.files}
	if w.describe != nil {
		attrs = append(attrs, w.describe(v)...)
	}
	w.o.Log.Info("tls: reloaded "+w.what, attrs...)
	return w.cur
}

// read reads every file. Files of a few kilobytes read once a second cost
// nothing next to a handshake, and comparing contents, unlike modification
// times, sees a rewrite within the file system's timestamp granularity.
func (w *watched[T]) read() []content {
	cs := make([]content, len(w.files))
	for i, f := range w.files {
		b, err := os.ReadFile(f)
		if err != nil {
			cs[i].err = err.Error()
		}
		cs[i].b = b
	}
	return cs
}

func (w *watched[T]) load(cs []content) (T, error) {
	bs := make([][]byte, len(cs))
	for i, c := range cs {
		if c.err != "" {
			var zero T
			return zero, errors.New(c.err)
		}
		bs[i] = c.b
	}
	return w.parse(bs)
}
