package prom

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeProm is a Prometheus HTTP API on loopback: /api/v1/query answers each
// query with a canned body chosen by its expression.
type fakeProm struct {
	*httptest.Server
	queries atomic.Int64

	mu      sync.Mutex
	bodies  map[string]canned // by expression
	missing canned            // for an expression without body
	seen    []seenQuery
}

// canned is one answer: an HTTP status and a full API response body.
type canned struct {
	status int
	body   []byte
}

type seenQuery struct {
	expr   string
	at     string // the time parameter
	header http.Header
}

var emptyVector = canned{http.StatusOK, []byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`)}

func newFakeProm(t testing.TB, bodies map[string]canned) *fakeProm {
	t.Helper()
	f := &fakeProm{bodies: bodies, missing: emptyVector}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProm) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.queries.Add(1)
	expr := r.Form.Get("query")
	f.mu.Lock()
	f.seen = append(f.seen, seenQuery{expr: expr, at: r.Form.Get("time"), header: r.Header.Clone()})
	c, ok := f.bodies[expr]
	if !ok {
		c = f.missing
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.status)
	w.Write(c.body)
}

func (f *fakeProm) setMissing(c canned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.missing = c
}

func (f *fakeProm) seenQueries() []seenQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenQuery(nil), f.seen...)
}

// fixtureKey names the canned response of q in testdata: engine, concept
// and part, e.g. "vllm-ttft-buckets".
func fixtureKey(q query) string {
	e := strings.ToLower(strings.TrimPrefix(q.engine.String(), "ENGINE_"))
	return e + "-" + strings.ReplaceAll(q.what(), " ", "-")
}

// fixtureBodies maps every query of the plan of b to the canned body in dir
// named after it (fixtureKey + ".json"); queries without a file get an
// empty vector. A body whose status is "error" is served with HTTP 422, as
// Prometheus does.
func fixtureBodies(t testing.TB, dir string, qs []query) map[string]canned {
	t.Helper()
	out := map[string]canned{}
	used := map[string]bool{}
	for _, q := range qs {
		name := fixtureKey(q) + ".json"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Status string }
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		status := http.StatusOK
		if env.Status == "error" {
			status = http.StatusUnprocessableEntity
		}
		out[q.expr] = canned{status, b}
		used[name] = true
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		if !used[filepath.Base(f)] {
			t.Fatalf("fixture %s matches no query", f)
		}
	}
	return out
}

// vectorBody is an API response body of a vector result.
func vectorBody(at time.Time, samples []fakeSample, warnings ...string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	ts := fmt.Sprintf("%.3f", float64(at.UnixMilli())/1e3)
	for i, s := range samples {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"metric":{`)
		for j := 0; j+1 < len(s.labels); j += 2 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "%q:%q", s.labels[j], s.labels[j+1])
		}
		fmt.Fprintf(&sb, `},"value":[%s,"%s"]}`, ts, s.value)
	}
	sb.WriteString(`]}`)
	if len(warnings) > 0 {
		w, _ := json.Marshal(warnings)
		fmt.Fprintf(&sb, `,"warnings":%s`, w)
	}
	sb.WriteString(`}`)
	return []byte(sb.String())
}

type fakeSample struct {
	labels []string // name, value, …
	value  string
}
