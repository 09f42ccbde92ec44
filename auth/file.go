package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
)

// MinTokenLen is the shortest token a file may hold: shorter ones can be
// guessed. `openssl rand -hex 32` makes a good one.
const MinTokenLen = 16

// DefaultCheckEvery is how often, at most, File looks whether its file
// changed.
const DefaultCheckEvery = time.Second

// fileFormat is the file's YAML:
//
//	tokens:
//	  - name: grafana            # the principal's name, in logs and limits
//	    role: reader             # reader | router | admin | alertmanager
//	    token: "…"               # at least MinTokenLen characters, or:
//	  - name: router-eu-1
//	    role: router
//	    token_sha256: "…"        # hex SHA-256 of the token, so the file holds no secret
//	clients:
//	  - subject: router-2.example.internal   # a verified client certificate's CN or DNS/URI/email SAN
//	    role: router
//	    name: router-2           # optional; default: the subject
type fileFormat struct {
	Tokens []struct {
		Name        string `yaml:"name"`
		Role        string `yaml:"role"`
		Token       string `yaml:"token"`
		TokenSHA256 string `yaml:"token_sha256"`
	} `yaml:"tokens"`
	Clients []struct {
		Subject string `yaml:"subject"`
		Role    string `yaml:"role"`
		Name    string `yaml:"name"`
	} `yaml:"clients"`
}

// table is one parse of the file.
type table struct {
	tokens  []tokenEntry
	clients map[string]Principal // by subject
}

type tokenEntry struct {
	sum [sha256.Size]byte
	p   Principal
}

// parse validates data into a table.
func parse(data []byte) (*table, error) {
	var f fileFormat
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // empty: no tokens
		return nil, err
	}
	t := &table{clients: make(map[string]Principal, len(f.Clients))}
	seen := make(map[[sha256.Size]byte]string, len(f.Tokens))
	for i, e := range f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if e.Name == "" {
			return nil, fmt.Errorf("%s: no name", where)
		}
		where += " (" + e.Name + ")"
		if !validRole(e.Role) {
			return nil, fmt.Errorf("%s: role %q is not reader, router, admin or alertmanager", where, e.Role)
		}
		var sum [sha256.Size]byte
		switch {
		case e.Token != "" && e.TokenSHA256 != "":
			return nil, fmt.Errorf("%s: give token or token_sha256, not both", where)
		case e.Token != "":
			if len(e.Token) < MinTokenLen {
				return nil, fmt.Errorf("%s: token shorter than %d characters", where, MinTokenLen)
			}
			sum = sha256.Sum256([]byte(e.Token))
		case e.TokenSHA256 != "":
			b, err := hex.DecodeString(e.TokenSHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s: token_sha256 is not %d hex digits", where, 2*sha256.Size)
			}
			copy(sum[:], b)
		default:
			return nil, fmt.Errorf("%s: no token or token_sha256", where)
		}
		if other, dup := seen[sum]; dup {
			return nil, fmt.Errorf("%s: same token as %s", where, other)
		}
		seen[sum] = e.Name
		t.tokens = append(t.tokens, tokenEntry{sum: sum, p: Principal{Name: e.Name, Role: e.Role}})
	}
	for i, c := range f.Clients {
		where := fmt.Sprintf("clients[%d]", i)
		if c.Subject == "" {
			return nil, fmt.Errorf("%s: no subject", where)
		}
		where += " (" + c.Subject + ")"
		if !validRole(c.Role) {
			return nil, fmt.Errorf("%s: role %q is not reader, router, admin or alertmanager", where, c.Role)
		}
		if _, dup := t.clients[c.Subject]; dup {
			return nil, fmt.Errorf("%s: subject listed twice", where)
		}
		name := c.Name
		if name == "" {
			name = c.Subject
		}
		t.clients[c.Subject] = Principal{Name: name, Role: c.Role}
	}
	return t, nil
}

// token returns the principal whose token is tok. Every entry is compared,
// in constant time, against tok's SHA-256: neither the time taken nor which
// entry matched depends on how much of a token was right, or on its length.
func (t *table) token(tok string) (Principal, bool) {
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range t.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.tokens[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return t.tokens[found].p, true
}

// client returns the principal cert's subject CN, or else its first DNS,
// URI or email SAN listed, is mapped to.
func (t *table) client(cert *x509.Certificate) (Principal, bool) {
	for _, s := range Subjects(cert) {
		if p, ok := t.clients[s]; ok {
			return p, true
		}
	}
	return Principal{}, false
}

// Subjects are the names a client certificate is matched by, in order: its
// subject common name, DNS names, URIs and email addresses.
func Subjects(cert *x509.Certificate) []string {
	var s []string
	if cert.Subject.CommonName != "" {
		s = append(s, cert.Subject.CommonName)
	}
	s = append(s, cert.DNSNames...)
	for _, u := range cert.URIs {
		s = append(s, u.String())
	}
	return append(s, cert.EmailAddresses...)
}

// FileOptions configure a File. Zero values take the defaults.
type FileOptions struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// CheckEvery is the least time between two looks at whether the file
	// changed (default DefaultCheckEvery).
	CheckEvery time.Duration
	// Log receives reload errors and reloads (default: discarded).
	Log *slog.Logger
}

// File is a tokens file (format: see docs/configuration.md, The tokens file): tokens and client
// certificate subjects, each with a name and a role. It is re-read when it
// changes: a lookup more than CheckEvery after the last look stats the file,
// and reads it again when its size, modification time or identity (a
// replaced file, a Kubernetes secret's symlink swap) changed; Run looks
// every CheckEvery even when no request comes. A file that does not parse
// then keeps the previous tokens in force, and the error is logged once.
// Each reload ends the context Reloaded returned before it, so that what
// was granted on the old tokens (an open stream) can be checked again. Safe
// for concurrent use.
type File struct {
	path string
	o    FileOptions
	cur  atomic.Pointer[table]
	gen  atomic.Pointer[generation]

	mu        sync.Mutex // held by the one lookup that checks the file
	lastCheck time.Time
	stat      os.FileInfo // of the file cur was read from, or that failed last
}

// OpenFile reads the tokens file at path; an error says what is wrong with
// it.
func OpenFile(path string, o FileOptions) (*File, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultCheckEvery
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	f := &File{path: path, o: o}
	st, t, err := f.read()
	if err != nil {
		return nil, err
	}
	f.cur.Store(t)
	f.gen.Store(newGeneration())
	f.stat, f.lastCheck = st, o.Now()
	return f, nil
}

// generation is the time between two reloads: its context ends at the
// second.
type generation struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newGeneration() *generation {
	ctx, cancel := context.WithCancel(context.Background())
	return &generation{ctx: ctx, cancel: cancel}
}

// Reloaded returns a context that ends when the file is next reloaded,
// after the new tokens are in force: a lookup made once it is done sees
// them. Take it before the lookup whose outcome it should invalidate, so
// that no reload falls between the two. It carries no values or deadline;
// it only signals, and costs nothing to wait on with context.AfterFunc.
func (f *File) Reloaded() context.Context {
	return f.gen.Load().ctx
}

// Run looks whether the file changed every CheckEvery until ctx ends, so
// that a change is in force, and Reloaded signals it, within CheckEvery
// even when no request comes to look. serve runs it.
func (f *File) Run(ctx context.Context) {
	t := time.NewTicker(f.o.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.Check()
		}
	}
}

// Check looks whether the file changed, if CheckEvery has passed since the
// last look, and reloads it if so: what Run does at each tick, and what a
// lookup does first.
func (f *File) Check() {
	f.mu.Lock()
	f.check()
	f.mu.Unlock()
}

// read stats and parses the file.
func (f *File) read() (os.FileInfo, *table, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return st, nil, err
	}
	t, err := parse(data)
	if err != nil {
		return st, nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return st, t, nil
}

// Token returns the principal holding bearer token tok.
func (f *File) Token(tok string) (Principal, bool) {
	return f.table().token(tok)
}

// Client returns the principal a verified client certificate is mapped to.
func (f *File) Client(cert *x509.Certificate) (Principal, bool) {
	return f.table().client(cert)
}

// table returns the tokens in force, first re-reading the file if it is
// time to look and it changed.
func (f *File) table() *table {
	// While another lookup checks, this one uses what is in force.
	if f.mu.TryLock() {
		f.check()
		f.mu.Unlock()
	}
	return f.cur.Load()
}

// check re-reads the file if it changed; f.mu is held.
func (f *File) check() {
	now := f.o.Now()
	if now.Sub(f.lastCheck) < f.o.CheckEvery {
		return
	}
	f.lastCheck = now
	st, err := os.Stat(f.path)
	if err != nil {
		if f.stat != nil {
			f.o.Log.Error("tokens file unreadable; keeping the tokens read before", "path", f.path, "err", err)
			f.stat = nil
		}
		return
	}
	if f.stat != nil && os.SameFile(st, f.stat) && st.Size() == f.stat.Size() && st.ModTime().Equal(f.stat.ModTime()) {
		return
	}
	st, t, err := f.read()
	f.stat = st
	if err != nil {
		f.o.Log.Error("tokens file changed but cannot be used; keeping the tokens read before", "path", f.path, "err", err)
		return
	}
	f.cur.Store(t)
	f.o.Log.Info("tokens file reloaded", "path", f.path, "tokens", len(t.tokens), "clients", len(t.clients))
	f.gen.Swap(newGeneration()).cancel()
}
