package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/openapi"
)

// RESTPrefix is the path prefix of the REST surface: the reads at the
// resource URLs of their google.api.http options (GET /v1/nodes,
// /v1/nodes/{node}/diagnosis, …), which openapi/llmdiag.v1.yaml describes.
const RESTPrefix = "/v1/"

// maxRESTAnswerBytes bounds what the transcoder buffers of one answer to
// rewrite it as REST JSON: far above the largest read (a full page of
// ListNodes, a history of MaxHistoryPoints).
const maxRESTAnswerBytes = 64 << 20

// REST returns next with the DiagnosisService's reads also served as REST
// resources under RESTPrefix. connectrpc.com/vanguard transcodes such a
// request into a Connect request (binary, and a GET for a GET) to next, and
// its answer back into JSON, so everything next does to a call applies
// unchanged: authentication and roles, limits, the Cache-Control of a
// read, metrics and tracing. A REST error is its HTTP status with a
// google.rpc.Status JSON body. Paths outside RESTPrefix go to next as they
// came: Connect, gRPC and gRPC-Web never pass through the transcoder.
//
// What the transcoder refuses itself, before any call (a path no read
// has, a query parameter that names no field or holds no valid value),
// is answered as a google.rpc.Status JSON body too (restWriter): 404,
// 405, or 400 INVALID_ARGUMENT naming the parameter.
func REST(next http.Handler) (http.Handler, error) {
	reach := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(restKey{}).(*restCall); ok {
			c.reached.Store(true)
		}
		next.ServeHTTP(w, r)
	})
	svc := vanguard.NewService(llmdiagv1connect.DiagnosisServiceName, reach,
		vanguard.WithTargetProtocols(vanguard.ProtocolConnect),
		vanguard.WithTargetCodecs(vanguard.CodecProto),
		vanguard.WithMaxMessageBufferBytes(maxRESTAnswerBytes))
	// JSON as connect-go writes it: a field at its default (false, 0,
	// the _UNSPECIFIED enum) or unset is absent, not null, as vanguard's
	// default codec writes it. Emitting defaults is no option: a read
	// mask's trimmed fields would read as false and 0.
	json := vanguard.WithCodec(func(res vanguard.TypeResolver) vanguard.Codec {
		return &vanguard.JSONCodec{
			MarshalOptions:   protojson.MarshalOptions{Resolver: res},
			UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res},
		}
	})
	unknown := vanguard.WithUnknownHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("no REST resource at %s %.*s (%s lists them)", r.Method, maxLoggedPath, r.URL.Path, auth.OpenAPIPath), http.StatusNotFound)
	}))
	t, err := vanguard.NewTranscoder([]*vanguard.Service{svc}, json, unknown)
	if err != nil {
		return nil, fmt.Errorf("REST transcoder: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, RESTPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		call := &restCall{}
		rr := r.WithContext(context.WithValue(r.Context(), restKey{}, call)) // a copy: the transcoder rewrites its URL
		rr.URL = new(*r.URL)
		rr.URL.Path, rr.URL.RawPath = restPath(r.URL), ""
		rr.URL.RawQuery = restQuery(r.URL.RawQuery)
		rw := &restWriter{ResponseWriter: w, call: call}
		t.ServeHTTP(rw, rr)
		rw.finish()
	}), nil
}

// openAPIHandler serves openapi/llmdiag.v1.yaml.
func openAPIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/yaml")
		h.Set("Cache-Control", "public, max-age=3600")
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(openapi.Document))
	})
}

// restPath is the request path as the transcoder must match it: escaped,
// so that a node id holding a slash (sent as %2F) stays one segment (the
// transcoder unescapes each segment it captures), and, under
// /v1/nodes/, with every colon escaped too: node ids hold colons
// ("ns/pod:8000"), which no client escapes, and which the transcoder
// would take for a custom verb (no path under /v1/nodes/ has one).
func restPath(u *url.URL) string {
	p := u.EscapedPath()
	if rest, ok := strings.CutPrefix(p, nodesPrefix); ok {
		p = nodesPrefix + strings.ReplaceAll(rest, ":", "%3A")
	}
	return p
}

// nodesPrefix is the REST paths of one node.
const nodesPrefix = RESTPrefix + "nodes/"

// restQuery is the query with each readMask path in JSON's lowerCamelCase
// (load_score → loadScore), the only form the transcoder reads a
// FieldMask in, so that the proto's names, which the API's documentation
// uses, work too. Other parameters are left as they came.
func restQuery(raw string) string {
	if !strings.Contains(raw, "_") || (!strings.Contains(raw, "readMask=") && !strings.Contains(raw, "read_mask=")) {
		return raw
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return raw // the transcoder refuses it, naming what is wrong
	}
	for _, key := range []string{"readMask", "read_mask"} {
		for i, v := range q[key] {
			paths := strings.Split(v, ",")
			for j, p := range paths {
				paths[j] = lowerCamel(p)
			}
			q[key][i] = strings.Join(paths, ",")
		}
	}
	return q.Encode()
}

// lowerCamel is a snake_case field path in lowerCamelCase
// ("gpu.xid_errors" → "gpu.xidErrors").
func lowerCamel(path string) string {
	var b strings.Builder
	up := false
	for _, c := range path {
		switch {
		case c == '_':
			up = true
			continue
		case up && c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		up = false
		b.WriteRune(c)
	}
	return b.String()
}
