package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
)

// Errors Authenticate returns; none quotes the credential.
var (
	// ErrNoCredentials: neither a bearer token nor a verified client
	// certificate.
	ErrNoCredentials = errors.New("no credentials: send Authorization: Bearer TOKEN or a client certificate")
	// ErrUnknownToken: a bearer token no one holds.
	ErrUnknownToken = errors.New("unknown bearer token")
	// ErrMalformed: an Authorization header that is not "Bearer TOKEN".
	ErrMalformed = errors.New("authorization header is not \"Bearer TOKEN\"")
)

// Authenticator finds the principal of a request.
type Authenticator struct {
	// Tokens holds the bearer tokens and client certificate subjects; nil
	// when no tokens file is given.
	Tokens *File
	// UnmappedClientRole is the role of a verified client certificate whose
	// subject Tokens does not map (or of every verified certificate when
	// Tokens is nil): "" gives it no role, so it is refused every
	// procedure that is not public.
	UnmappedClientRole string
}

// Reloaded returns a context that ends when the principals Authenticate
// finds may have changed (File.Reloaded), or nil when they cannot change
// (no tokens file).
func (a *Authenticator) Reloaded() context.Context {
	if a.Tokens == nil {
		return nil
	}
	return a.Tokens.Reloaded()
}

// Authenticate returns the request's principal. A bearer token, when the
// request carries an Authorization header, decides alone: a client with a
// certificate and a wrong token is refused. Otherwise the leaf of a verified
// client certificate chain (r.TLS.VerifiedChains; a certificate that was
// presented but not verified counts for nothing) names the principal:
// the subject Tokens maps it to, else a principal named after its subject
// with UnmappedClientRole.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		scheme, tok, ok := strings.Cut(h[0], " ")
		tok = strings.TrimSpace(tok)
		if len(h) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return Principal{}, ErrMalformed
		}
		if a.Tokens != nil {
			if p, ok := a.Tokens.Token(tok); ok {
				return p, nil
			}
		}
		return Principal{}, ErrUnknownToken
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		if a.Tokens != nil {
			if p, ok := a.Tokens.Client(cert); ok {
				return p, nil
			}
		}
		name := "unnamed client certificate"
		if s := Subjects(cert); len(s) > 0 {
			name = s[0]
		}
		return Principal{Name: name, Role: a.UnmappedClientRole}, nil
	}
	return Principal{}, ErrNoCredentials
}
