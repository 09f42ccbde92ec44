package server

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Plain GETs of the reads.
//
// The DiagnosisService's reads carry idempotency_level = NO_SIDE_EFFECTS,
// so connect-go also serves them as HTTP GET (?connect=v1&encoding=json&
// message=…): browsers, caches and curl can fetch them. A GET answer says
// how it may be cached:
//
//   - success: "private, max-age=N": only the caller's own cache (a
//     browser's) may keep it, since what an answer holds depends on the
//     token that asked (Vary: Authorization, beside connect-go's
//     Accept-Encoding); N is Surfaces.GetMaxAge, which serve sets to
//     --interval: the data changes once a refresh, so a kept answer is at
//     most one refresh behind a fresh one. Below a second it is
//     "private, no-cache" (revalidate every time).
//   - error: "no-store": a node not found now may be there at the next
//     refresh, and a refusal (rate limit, unavailable store) is of the
//     moment.
//   - GetRoutability, success or not: "no-store", as GET /routable/{node}:
//     a router asks for the answer of the moment.
//
// The REST paths (rest.go) reach these handlers as GETs too.
//
// POST answers (and gRPC, gRPC-Web) carry no Cache-Control: POSTs are not
// cached.

// readProcedures are the paths of sd's unary methods marked
// NO_SIDE_EFFECTS: the ones connect-go serves over GET.
func readProcedures(sd protoreflect.ServiceDescriptor) map[string]bool {
	out := map[string]bool{}
	methods := sd.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		opts, _ := m.Options().(*descriptorpb.MethodOptions)
		if !m.IsStreamingClient() && !m.IsStreamingServer() && opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
			out["/"+string(sd.FullName())+"/"+string(m.Name())] = true
		}
	}
	return out
}

// cacheControl is the Cache-Control of a successful GET answer.
func cacheControl(maxAge time.Duration) string {
	if s := int64(maxAge / time.Second); s > 0 {
		return "private, max-age=" + strconv.FormatInt(s, 10)
	}
	return "private, no-cache"
}

// cacheGets returns next with GET answers marked as the comment above says.
func cacheGets(maxAge time.Duration, next http.Handler) http.Handler {
	return cacheGetsAs(cacheControl(maxAge), next)
}

// cacheGetsAs is cacheGets with ok the Cache-Control of a success.
func cacheGetsAs(ok string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Authorization")
		next.ServeHTTP(&cachingWriter{ResponseWriter: w, ok: ok}, r)
	})
}

// cachingWriter sets Cache-Control when the status is written.
type cachingWriter struct {
	http.ResponseWriter
	ok      string
	written bool
}

func (w *cachingWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		cc := "no-store"
		if code == http.StatusOK {
			cc = w.ok
		}
		w.Header().Set("Cache-Control", cc)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *cachingWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes a flush on, the status first.
func (w *cachingWriter) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *cachingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
