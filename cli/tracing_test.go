package cli_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sim"
)

// spanNames is an OTLP/HTTP receiver keeping the names of the spans it gets.
type spanNames struct {
	mu    sync.Mutex
	names []string
}

func (s *spanNames) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var m collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range m.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.names = append(s.names, sp.GetName())
			}
		}
	}
	s.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *spanNames) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.names, name)
}

// TestServeExportsTraces: serve with OTEL_EXPORTER_OTLP_ENDPOINT set says
// so in its log, and on exit has flushed a refresh cycle and an RPC's
// spans to the collector.
func TestServeExportsTraces(t *testing.T) {
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := simtest.Start(t, cfg)

	rcv := &spanNames{}
	collector := httptest.NewServer(rcv)
	defer collector.Close()
	addr := testkit.FreeAddr(t)
	args := []string{"serve", "--listen", addr, "--interval", "1s"}
	for _, n := range f.FleetFile().Nodes {
		args = append(args, "--target", n.ID+"="+n.URL)
	}
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_SERVICE_NAME": "llmdiag-cli-test"}
	var out, errw testkit.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, args, clitest.Env(vars, &out, &errw)) }()

	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	node := f.FleetFile().Nodes[0].ID
	clitest.WaitFor(t, "a diagnosis", 30*time.Second, func() bool {
		_, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node}))
		return err == nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, errw.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20s")
	}
	for _, want := range []string{"refresh.cycle", "scrape", "llmdiag.v1.DiagnosisService/DiagnoseNode", "store.get"} {
		if !rcv.has(want) {
			t.Errorf("collector has no %q span after serve's exit", want)
		}
	}
	if l := errw.String(); !strings.Contains(l, "tracing on") || !strings.Contains(l, collector.URL) {
		t.Errorf("serve's log does not say where traces go:\n%s", l)
	}
}

// TestServeTracingUsageError: a bad OTEL_* value stops serve at start,
// naming the variable.
func TestServeTracingUsageError(t *testing.T) {
	_, _, err := clitest.Run(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"},
		"serve", "--listen", testkit.FreeAddr(t), "--target", "a=http://127.0.0.1:1/metrics")
	if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("err %v (exit %d), want a usage error naming OTEL_EXPORTER_OTLP_PROTOCOL", err, cli.ExitCode(err))
	}
}
