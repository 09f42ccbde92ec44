package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/internal/refusal"
)

// Authorize returns next behind authentication and authorization: every
// request on the port, whatever its path or protocol, needs a principal
// (from a, see auth.Authenticator) whose role grants its path
// (auth.Allowed), except the public grpc.health.v1 procedures. No or an
// unknown credential answers Unauthenticated; a role that does not grant the
// path PermissionDenied, each in the caller's protocol (Connect, gRPC,
// gRPC-Web; other requests get the Connect JSON error with the matching
// HTTP status). Each denial is a refusal (reason auth or permission, see
// refusal.Log: counted, and logged at warn level within the log's bound)
// with the principal ("anonymous" when there is none), the path and the
// reason; never the credential. An allowed request carries its principal in
// its context (auth.FromContext). A request that lasts (StreamHealth and
// any other server-streaming procedure) is checked again at every reload of
// the tokens file: once its credential is gone its context ends with an
// Unauthenticated *connect.Error as cause (context.Cause), or
// PermissionDenied once its role no longer grants the path, which the
// stream returns; the streams of other principals go on.
func Authorize(next http.Handler, a *auth.Authenticator, refusals *refusal.Log) http.Handler {
	ew := connect.NewErrorWriter()
	deny := func(w http.ResponseWriter, r *http.Request, code connect.Code, who string, err error) {
		proc := loggedPath(r.URL.Path)
		reason := refusal.Auth
		if code == connect.CodePermissionDenied {
			reason = refusal.Permission
		}
		refusals.Refuse(reason, "request denied", "principal", who, "procedure", proc, "code", code.String(), "reason", err.Error(), "remote", r.RemoteAddr)
		if code == connect.CodeUnauthenticated {
			w.Header().Set("WWW-Authenticate", `Bearer realm="llmdiag"`)
		}
		_ = ew.Write(w, r, connect.NewError(code, err))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proc := r.URL.Path
		if auth.Public(proc) {
			next.ServeHTTP(w, r)
			return
		}
		var reloaded context.Context
		if lasting(proc) {
			reloaded = a.Reloaded() // before Authenticate: see revokeOnReload
		}
		p, err := a.Authenticate(r)
		if err != nil {
			deny(w, r, connect.CodeUnauthenticated, "anonymous", err)
			return
		}
		if !auth.Allowed(p.Role, proc) {
			role := p.Role
			if role == "" {
				role = "none"
			}
			deny(w, r, connect.CodePermissionDenied, p.Name, fmt.Errorf("%s (role %s) may not call %.*s", p.Name, role, maxLoggedPath, proc))
			return
		}
		ctx := auth.NewContext(r.Context(), p)
		if reloaded != nil {
			var done func()
			ctx, done = revokeOnReload(ctx, reloaded, r, a, p, refusals)
			defer done()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// maxLoggedPath bounds the request path a denial quotes.
const maxLoggedPath = 256

// loggedPath is path as a log line quotes it: the caller chose it, so at
// most maxLoggedPath bytes of it.
func loggedPath(path string) string {
	if len(path) > maxLoggedPath {
		return path[:maxLoggedPath] + "…"
	}
	return path
}

// CheckExposure decides whether serve may listen on addr: on a loopback
// address anything goes; elsewhere both TLS and authentication are needed,
// or insecure (--insecure) to go without. It returns a warning to log at
// start when insecure is what lets it through, and an error naming the flags
// when nothing does.
func CheckExposure(addr string, tls, authn, insecure bool) (warning string, err error) {
	if Loopback(addr) || (tls && authn) {
		return "", nil
	}
	var missing []string
	if !tls {
		missing = append(missing, "TLS (--tls-cert, --tls-key)")
	}
	if !authn {
		missing = append(missing, "authentication (--auth-tokens, --tls-client-ca)")
	}
	what := strings.Join(missing, " and ")
	if insecure {
		return fmt.Sprintf("listening on %s, not a loopback address, without %s (--insecure): anyone who reaches the port can call it and read what it answers", addr, what), nil
	}
	return "", fmt.Errorf("--listen %s is not a loopback address: serving it without %s needs --insecure", addr, what)
}

// Loopback reports whether the listen address addr (host:port) only
// accepts connections from this machine: a loopback IP or "localhost". An
// empty host (every interface) or any other name is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// PrincipalOr returns a per-caller key for limits: "NAME (ROLE)" when the
// request carries an authenticated principal (Authorize put it there, so
// Authorize must run first), else fallback(r) (the remote host, when
// authentication is off). Keys of the two kinds cannot collide: a host has
// no space.
func PrincipalOr(fallback func(*http.Request) string) func(*http.Request) string {
	return func(r *http.Request) string {
		if p, ok := auth.FromContext(r.Context()); ok {
			return p.Name + " (" + p.Role + ")"
		}
		return fallback(r)
	}
}
