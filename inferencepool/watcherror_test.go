package inferencepool_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/discovery/targetgroup"
	"k8s.io/client-go/rest"

	"github.com/llmdiag/llmdiag/inferencepool"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestWatchRefusedIsAnError: an API server that refuses the LIST (403, as
// for want of RBAC) is logged at error level, which fleetsd takes for the
// discovery failing; client-go alone would only tell klog.
func TestWatchRefusedIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden: User \"llmdiag\" cannot list resource \"pods\"","reason":"Forbidden","code":403}`))
	}))
	defer srv.Close()
	var logs testkit.SyncBuffer
	d, err := inferencepool.NewDiscoverer(&rest.Config{Host: srv.URL}, []string{"serving"}, 0, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	up := make(chan []*targetgroup.Group)
	go func() { defer close(done); d.Run(ctx, up) }()
	defer func() { cancel(); <-done }()
	testkit.Wait{For: 20 * time.Second}.Until(t, "an error naming the refusal", func() bool {
		return strings.Contains(logs.String(), "level=ERROR") && strings.Contains(logs.String(), "forbidden")
	})
	select {
	case g := <-up:
		t.Errorf("groups sent while every LIST is refused: %v", g)
	default:
	}
}

// fakeAPI is an API server of InferencePools and pods in namespace
// serving: pool p selects app=qwen on port 8000. Down, it closes every
// connection unanswered (and ends the open watches), as an API server
// that went away.
type fakeAPI struct {
	mu   sync.Mutex
	pods []string
	down bool
	gone chan struct{} // closed when it goes down
}

func (f *fakeAPI) setDown(down bool, pods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if down && !f.down {
		close(f.gone)
	}
	if !down && f.down {
		f.gone = make(chan struct{})
	}
	f.down = down
	f.pods = append(f.pods, pods...)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	down, gone, pods := f.down, f.gone, slices.Clone(f.pods)
	f.mu.Unlock()
	if down {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	switch {
	case r.URL.Path == "/version":
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	case q.Get("sendInitialEvents") == "true":
		w.WriteHeader(http.StatusBadRequest) // no watch-list: client-go lists
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`)
	case q.Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-gone:
		}
	case r.URL.Path == "/api/v1/namespaces/serving/pods":
		var items []string
		for i, name := range pods {
			items = append(items, fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"serving","labels":{"app":"qwen"},"resourceVersion":"1"},"status":{"podIP":"10.0.0.%d","phase":"Running"}}`, name, i+1))
		}
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[%s]}`, strings.Join(items, ","))
	case r.URL.Path == "/apis/inference.networking.k8s.io/v1/namespaces/serving/inferencepools":
		fmt.Fprint(w, `{"kind":"InferencePoolList","apiVersion":"inference.networking.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[`+
			`{"kind":"InferencePool","apiVersion":"inference.networking.k8s.io/v1","metadata":{"name":"p","namespace":"serving","resourceVersion":"1"},`+
			`"spec":{"selector":{"matchLabels":{"app":"qwen"}},"targetPorts":[{"number":8000}]}}]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

// TestAPIServerAwayAndBack: an API server that stops answering after the
// first list is logged as an error once (client-go alone retries without a
// word); once it answers again the discoverer lists anew at once and
// sends the pods it has now.
func TestAPIServerAwayAndBack(t *testing.T) {
	api := &fakeAPI{pods: []string{"qwen-0"}, gone: make(chan struct{})}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var logs testkit.SyncBuffer
	d, err := inferencepool.NewDiscoverer(&rest.Config{Host: srv.URL}, []string{"serving"}, 50*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	up := make(chan []*targetgroup.Group, 1)
	go func() { defer close(done); d.Run(ctx, up) }()
	defer func() { cancel(); <-done }()
	targets := func(within time.Duration) int {
		t.Helper()
		select {
		case g := <-up:
			return len(g[0].Targets)
		case <-time.After(within):
			t.Fatalf("no groups within %v; log:\n%s", within, logs.String())
			return 0
		}
	}
	if n := targets(20 * time.Second); n != 1 {
		t.Fatalf("%d targets, want qwen-0's", n)
	}

	api.setDown(true, "qwen-1")
	w := testkit.Wait{For: 20 * time.Second}
	w.Until(t, "an error saying the API server does not answer", func() bool {
		return strings.Contains(logs.String(), `level=ERROR msg="inferencepool: the Kubernetes API server does not answer`)
	})
	api.setDown(false)
	back := time.Now()
	for {
		n := targets(20 * time.Second)
		if n == 2 {
			break
		}
		if n != 1 {
			t.Fatalf("%d targets", n)
		}
	}
	t.Logf("listed anew %v after the API server answered again", time.Since(back).Round(time.Millisecond))
	// Either the health check saw the server back and listed anew, or
	// the informers' own retry listed first: either way it is logged.
	if !strings.Contains(logs.String(), "the Kubernetes API server answers again; ") {
		t.Errorf("the API server's return not logged:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "does not answer"); n != 1 {
		t.Errorf("%d errors of the API server away, want 1:\n%s", n, logs.String())
	}
}
