package promfake

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Canned is one answer: an HTTP status and a full API response body.
type Canned struct {
	Status int
	Body   []byte
}

// EmptyVector is the answer to a query without a body: no series.
var EmptyVector = Canned{http.StatusOK, []byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`)}

// Seen is one query a Server received.
type Seen struct {
	Expr string
	// At is the time parameter as sent.
	At     string
	Header http.Header
}

// Server is a fake Prometheus API on loopback.
type Server struct {
	*httptest.Server
	// Queries counts the queries received.
	Queries atomic.Int64

	mu      sync.Mutex
	bodies  map[string]Canned // by expression
	synth   *Synth            // answers at the query's time, when set
	missing Canned            // for an expression without body
	seen    []Seen
	record  bool
}

// New serves bodies (by expression; others get EmptyVector) until the test
// ends, recording every query (Seen).
func New(tb testing.TB, bodies map[string]Canned) *Server {
	tb.Helper()
	f := &Server{bodies: bodies, missing: EmptyVector, record: true}
	f.Server = httptest.NewServer(f)
	tb.Cleanup(f.Close)
	return f
}

// ServeSynth serves s, rendered at each query's time parameter, until the
// test ends. It does not record queries.
func ServeSynth(tb testing.TB, s *Synth) *Server {
	tb.Helper()
	f := &Server{synth: s, missing: EmptyVector}
	f.Server = httptest.NewServer(f)
	tb.Cleanup(f.Close)
	return f
}

// ServeHTTP answers /api/v1/query.
func (f *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.Queries.Add(1)
	expr, at := r.Form.Get("query"), r.Form.Get("time")
	var c Canned
	ok := false
	if f.synth != nil {
		var body []byte
		if body, ok = f.synth.Body(expr, parseTime(at)); ok {
			c = Canned{http.StatusOK, body}
		}
	}
	f.mu.Lock()
	if f.record {
		f.seen = append(f.seen, Seen{Expr: expr, At: at, Header: r.Header.Clone()})
	}
	if !ok {
		if c, ok = f.bodies[expr]; !ok {
			c = f.missing
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(c.Body)))
	w.WriteHeader(c.Status)
	w.Write(c.Body)
}

// SetMissing sets the answer to an expression without body.
func (f *Server) SetMissing(c Canned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.missing = c
}

// Seen returns the queries received so far, oldest first.
func (f *Server) Seen() []Seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Seen(nil), f.seen...)
}

// parseTime reads the API's time parameter (Unix seconds, with a
// fraction); the zero time when absent or invalid.
func parseTime(s string) time.Time {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(math.Round(v * 1e3))).UTC()
}
