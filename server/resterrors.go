package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"
)

// restKey marks the context of a REST request with its restCall.
type restKey struct{}

// restCall records whether the transcoder turned a REST request into a
// call of the handler behind it.
type restCall struct{ reached atomic.Bool }

// maxRefusalBytes bounds what restWriter keeps of the transcoder's own
// refusal (a line of text or a small JSON status).
const maxRefusalBytes = 4 << 10

// restWriter passes the answer of a call on (an error answer marked
// no-store, as the reads mark theirs, cache.go). An answer the
// transcoder wrote itself, without a call, is kept and rewritten by
// finish as a google.rpc.Status JSON body: vanguard writes some as text,
// some with a Content-Type of "application/", and a query parameter that
// names no field as a 500, though the request is at fault.
type restWriter struct {
	http.ResponseWriter
	call    *restCall
	held    bool // the transcoder's own answer, kept for finish
	status  int
	refusal bytes.Buffer
}

func (w *restWriter) WriteHeader(code int) {
	if w.held || w.status != 0 {
		return
	}
	if w.call.reached.Load() {
		w.status = code
		h := w.ResponseWriter.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if code >= 400 && h.Get("Cache-Control") == "" {
			h.Set("Cache-Control", "no-store") // a refusal before the reads' own headers (auth, limits)
		}
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.held, w.status = true, code
}

func (w *restWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.held {
		return w.ResponseWriter.Write(p)
	}
	if room := maxRefusalBytes - w.refusal.Len(); room > 0 {
		w.refusal.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Flush passes a flush on unless the answer is held.
func (w *restWriter) Flush() {
	if !w.held {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *restWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// restStatus is google.rpc.Status as JSON, without details.
type restStatus struct {
	Code    int32  `json:"code"`
	Message string `json:"message"`
}

// finish writes a held answer as a google.rpc.Status JSON body.
func (w *restWriter) finish() {
	if !w.held {
		return
	}
	var st restStatus
	if json.Unmarshal(w.refusal.Bytes(), &st) != nil || st.Message == "" {
		st.Message = strings.TrimSpace(w.refusal.String())
	}
	code := w.status
	switch code {
	case http.StatusNotFound:
		st.Code = int32(connect.CodeNotFound)
	case http.StatusMethodNotAllowed:
		st.Code = int32(connect.CodeUnimplemented)
	case http.StatusRequestEntityTooLarge:
		st.Code = int32(connect.CodeResourceExhausted)
	default:
		// Before a call, what the transcoder refuses is the request.
		code, st.Code = http.StatusBadRequest, int32(connect.CodeInvalidArgument)
	}
	body, _ := json.Marshal(st) // cannot fail: a number and a string
	h := w.ResponseWriter.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.ResponseWriter.WriteHeader(code)
	_, _ = w.ResponseWriter.Write(body)
}
