package prom

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/promfake"
)

// fakeProm is a Prometheus HTTP API on loopback (internal/testing/promfake):
// /api/v1/query answers each query with a canned body chosen by its
// expression.
type fakeProm = promfake.Server

// canned is one answer: an HTTP status and a full API response body.
type canned = promfake.Canned

var emptyVector = promfake.EmptyVector

func newFakeProm(t testing.TB, bodies map[string]canned) *fakeProm {
	t.Helper()
	return promfake.New(t, bodies)
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
		out[q.expr] = canned{Status: status, Body: b}
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
