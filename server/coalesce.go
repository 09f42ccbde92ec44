package server

import (
	"net/http"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// coalesceMaxBytes is the largest answer a coalescer holds back to write at
// once; a larger one (a big fleet listing) goes out as it is written.
const coalesceMaxBytes = 64 << 10

// coalescer makes each answer of a unary procedure reach the HTTP/2 server
// in one write when the handler returns, instead of one write per envelope
// part and a flush after the message. net/http's HTTP/2 server hands every
// handler write to its connection goroutine and waits for it, and writes a
// frame over its 4 KiB buffer from a goroutine of its own: an 8 KB
// DiagnoseNode answer written as prefix, body, flush and trailers cost four
// such round trips and two extra goroutines. Coalesced, DiagnoseNode's p50
// at concurrency 8 fell from 1.48–1.56× the health check's to 1.30–1.38×
// (BenchmarkUnary). Streaming procedures must not be coalesced: their
// messages are due as they are sent.
type coalescer struct {
	bufs sync.Pool // *[]byte
}

func newCoalescer() *coalescer {
	return &coalescer{bufs: sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}}
}

// wrap returns next with its answers coalesced.
func (c *coalescer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bp := c.bufs.Get().(*[]byte)
		cw := &coalescingWriter{ResponseWriter: w, buf: (*bp)[:0]}
		next.ServeHTTP(cw, r)
		_ = cw.release() // a failed write is the client's; the handler is done
		if cap(cw.buf) <= coalesceMaxBytes {
			*bp = cw.buf[:0]
			c.bufs.Put(bp)
		}
	})
}

// unaryProcedures are the paths ("/package.Service/Method") of sd's unary
// methods.
func unaryProcedures(sd protoreflect.ServiceDescriptor) []string {
	var paths []string
	methods := sd.Methods()
	for i := range methods.Len() {
		if m := methods.Get(i); !m.IsStreamingClient() && !m.IsStreamingServer() {
			paths = append(paths, "/"+string(sd.FullName())+"/"+string(m.Name()))
		}
	}
	return paths
}

// coalescingWriter holds an answer's status and body until release, or
// until the body would pass coalesceMaxBytes: from then on it writes
// through. Trailers need no holding: handlers set them in the header map,
// which is the underlying writer's.
type coalescingWriter struct {
	http.ResponseWriter
	buf     []byte
	status  int  // held status; 0 before the handler set one
	through bool // past the cap: everything goes straight to ResponseWriter
}

func (w *coalescingWriter) WriteHeader(code int) {
	switch {
	case w.through:
		w.ResponseWriter.WriteHeader(code)
	case w.status == 0:
		w.status = code
	}
}

func (w *coalescingWriter) Write(p []byte) (int, error) {
	if w.through {
		return w.ResponseWriter.Write(p)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.buf)+len(p) > coalesceMaxBytes {
		if err := w.release(); err != nil {
			return 0, err
		}
		w.through = true
		return w.ResponseWriter.Write(p)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// Flush is held back with the body until the writer writes through; the
// HTTP/2 server sends what release wrote when the handler returns.
func (w *coalescingWriter) Flush() {
	if w.through {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// release writes what is held back.
func (w *coalescingWriter) release() error {
	if w.through || w.status == 0 {
		return nil
	}
	w.ResponseWriter.WriteHeader(w.status)
	w.status = 0
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.ResponseWriter.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *coalescingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
