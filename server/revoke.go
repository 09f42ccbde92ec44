package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/auth"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/refusal"
)

// lasting reports whether a request to procedure can outlive a reload of the
// credentials: llmdiag's server-streaming procedures (StreamHealth).
// Authorize checks the credentials of these again at every reload. MCP
// needs no such check: it is served stateless with plain JSON answers
// (mcpserver.HTTPHandler), each POST a whole exchange authorized on its own,
// with no session or event stream to outlive a reload.
func lasting(procedure string) bool {
	return streamingProcedures[procedure]
}

// streamingProcedures are the paths of the server-streaming methods of
// llmdiag's services, from their descriptors: a streaming method added to
// the proto is covered without being listed here.
var streamingProcedures = func() map[string]bool {
	m := map[string]bool{}
	svcs := llmdiagv1.File_llmdiag_v1_diagnosis_proto.Services()
	for i := range svcs.Len() {
		methods := svcs.Get(i).Methods()
		for j := range methods.Len() {
			if md := methods.Get(j); md.IsStreamingServer() {
				m["/"+string(svcs.Get(i).FullName())+"/"+string(md.Name())] = true
			}
		}
	}
	return m
}()

// revocation ends a lasting request when a reload of the credentials takes
// away what let it in: its credential is gone (Unauthenticated) or its role
// no longer grants the procedure (PermissionDenied). Between reloads it is a
// callback registered on the credentials' Reloaded context
// (context.AfterFunc): no goroutine, no polling; at a reload one goroutine
// checks the request's credential again, and registers again if it still
// holds.
type revocation struct {
	a        *auth.Authenticator
	r        *http.Request // the request as it came: its credential
	p        auth.Principal
	cancel   context.CancelCauseFunc
	refusals *refusal.Log

	mu    sync.Mutex
	stop  func() bool // unregisters the pending check
	ended bool
}

// revokeOnReload returns ctx, ended with a *connect.Error as its cause
// (context.Cause) once a reload (reloaded, taken before r was authenticated)
// revokes r's credential or the grant of its path, and done, which the
// caller must call when the request ends.
func revokeOnReload(ctx context.Context, reloaded context.Context, r *http.Request, a *auth.Authenticator, p auth.Principal, refusals *refusal.Log) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	v := &revocation{a: a, r: r, p: p, cancel: cancel, refusals: refusals}
	v.arm(reloaded)
	return ctx, v.close
}

// arm checks again when reloaded ends.
func (v *revocation) arm(reloaded context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ended {
		v.stop = context.AfterFunc(reloaded, v.recheck)
	}
}

// recheck authenticates and authorizes the request again with the
// credentials now in force.
func (v *revocation) recheck() {
	next := v.a.Reloaded() // before the lookup: a reload during it is not missed
	proc := v.r.URL.Path
	p, err := v.a.Authenticate(v.r)
	switch {
	case err != nil:
		v.end(connect.CodeUnauthenticated, fmt.Errorf("credentials revoked: %w", err))
	case !auth.Allowed(p.Role, proc):
		v.end(connect.CodePermissionDenied, fmt.Errorf("%s (role %s) may no longer call %.*s", p.Name, p.Role, maxLoggedPath, proc))
	default:
		v.arm(next)
	}
}

// end cancels the request with code and err.
func (v *revocation) end(code connect.Code, err error) {
	v.mu.Lock()
	ended := v.ended
	v.ended = true
	v.mu.Unlock()
	if ended {
		return
	}
	reason := refusal.Auth
	if code == connect.CodePermissionDenied {
		reason = refusal.Permission
	}
	v.refusals.Refuse(reason, "open request ended: credentials revoked", "principal", v.p.Name, "procedure", loggedPath(v.r.URL.Path),
		"code", code.String(), "reason", err.Error(), "remote", v.r.RemoteAddr)
	v.cancel(connect.NewError(code, err))
}

// close unregisters the pending check and releases the context.
func (v *revocation) close() {
	v.mu.Lock()
	v.ended = true
	if v.stop != nil {
		v.stop()
	}
	v.mu.Unlock()
	v.cancel(nil)
}
