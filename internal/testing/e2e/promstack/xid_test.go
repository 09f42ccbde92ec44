package promstack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
)

// xidExporter serves one GPU's DCGM exposition whose last XID and XID
// counter a test sets.
type xidExporter struct {
	mu    sync.Mutex
	xid   int
	count int // DCGM_EXP_XID_ERRORS_TOTAL of xid; 0: no series
}

func (e *xidExporter) set(xid, count int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.xid, e.count = xid, count
}

func (e *xidExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	xid, count := e.xid, e.count
	e.mu.Unlock()
	const gpu = `gpu="0",UUID="GPU-5f2a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="h"`
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{%s} 97\n", gpu)
	fmt.Fprintf(&b, "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS{%s} %d\n", gpu, xid)
	if count > 0 {
		fmt.Fprintf(&b, "# TYPE DCGM_EXP_XID_ERRORS_TOTAL counter\nDCGM_EXP_XID_ERRORS_TOTAL{%s,xid=\"%d\"} %d\n", gpu, xid, count)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write([]byte(b.String()))
}

// xidState is one serve's answer about one node's XID.
type xidState struct {
	status   llmdiagv1.Status
	routable bool
	row      *llmdiagv1.Finding
	xids     []*llmdiagv1.GPUXid
}

func (s xidState) String() string {
	return fmt.Sprintf("%v routable %v, XID row %v %q %q, XIDs %v", s.status, s.routable, s.row.GetStatus(), s.row.GetValue(), s.row.GetConclusion(), s.xids)
}

// xidOf is what a serve answered of a node's XIDs.
func xidOf(a dcgmAnswer) xidState {
	s := xidState{status: a.d.GetStatus(), routable: a.d.GetRoutable(), xids: a.m.GetGpu().GetXidErrors()}
	for _, f := range a.d.GetFindings() {
		if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_GPU_XID {
			s.row = f
		}
	}
	return s
}

// TestXIDThroughPrometheus: an XID is an event, read alike by a serve
// scraping the DCGM exporters directly and one reading a real Prometheus
// that scrapes them every second, with gpu_xid_window 20s.
//
//   - fault: its GPU's last XID goes from 0 to 79 (fallen off the bus): CRIT
//     and not routable, the XID stamped after the change and not at the
//     first read; counted again (DCGM_EXP_XID_ERRORS_TOTAL 1 → 2), still
//     CRIT, stamped again; gpu_xid_window after that without a repeat,
//     WARN and routable again.
//   - app: its last XID goes from 0 to 13 (the application's): WARN with
//     its meaning, routable throughout.
//   - old: its exporter already holds XID 31 when llmdiag starts: OK, at
//     the first read, never drained.
func TestXIDThroughPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve reading a real Prometheus beside a direct scrape")
	}
	t.Parallel() // mostly waiting out gpu_xid_window
	const window = 20 * time.Second
	nodes := []string{"fault", "app", "old"}
	exporters := map[string]*xidExporter{"fault": {}, "app": {}, "old": {xid: 31, count: 1}}

	simFleet := vllmNodes(t, nodes...)

	direct, fromProm := &fleet.File{}, &fleet.File{}
	var targets []string
	targetLabels := map[string]map[string]string{}
	for _, n := range simFleet.FleetFile().Nodes {
		srv := httptest.NewServer(exporters[n.ID])
		t.Cleanup(srv.Close)
		exp := strings.TrimPrefix(srv.URL, "http://")
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u.Host, exp)
		// Each exporter joins its node by a label of its own target.
		targetLabels[u.Host] = map[string]string{"node": n.ID}
		targetLabels[exp] = map[string]string{"gpu_node": n.ID}
		n.DCGM = srv.URL + "/metrics"
		direct.Nodes = append(direct.Nodes, n)
		n.URL, n.DCGM = "", ""
		fromProm.Nodes = append(fromProm.Nodes, n)
	}
	thresholds := filepath.Join(t.TempDir(), "thresholds.yaml")
	if err := os.WriteFile(thresholds, fmt.Appendf(nil, "gpu_xid_window: %s\n", window), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: targetLabels, ScrapeInterval: time.Second})
	clients := servePair(t, direct, fromProm, prom.URL(), "gpu_node", "--thresholds", thresholds)

	// until waits for every serve's answer about node to satisfy ok.
	var last string
	until := func(what, node string, d time.Duration, ok func(xidState) bool) map[string]xidState {
		t.Helper()
		got := map[string]xidState{}
		clitest.WaitFor(t, what, d, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			for path, c := range clients {
				a, err := ask(ctx, c, node)
				s := xidOf(a)
				if err != nil {
					last = fmt.Sprintf("%s %s: %v", path, node, err)
					return false
				}
				if !ok(s) {
					last = fmt.Sprintf("%s %s: %v", path, node, s)
					return false
				}
				got[path] = s
			}
			return true
		}, &last)
		return got
	}
	xidRow := func(s xidState, st llmdiagv1.Status) bool { return s.row != nil && s.row.GetStatus() == st }

	// Every node read with its GPU; the old XID 31 at the first read, OK.
	for _, id := range []string{"fault", "app"} {
		until(id+" read, no XID, routable", id, 2*time.Minute, func(s xidState) bool {
			return xidRow(s, llmdiagv1.Status_STATUS_OK) && len(s.xids) == 0 && s.routable
		})
	}
	until("old: XID 31 at the first read, OK, routable", "old", time.Minute, func(s xidState) bool {
		return xidRow(s, llmdiagv1.Status_STATUS_OK) && len(s.xids) == 1 && s.xids[0].GetXid() == 31 && s.xids[0].GetAtFirstRead() && s.routable
	})

	// XID 79 and XID 13 appear.
	changed := time.Now()
	exporters["fault"].set(79, 1)
	exporters["app"].set(13, 1)
	first := until("fault: XID 79 CRIT, not routable", "fault", time.Minute, func(s xidState) bool {
		return s.status == llmdiagv1.Status_STATUS_CRIT && !s.routable && xidRow(s, llmdiagv1.Status_STATUS_CRIT) &&
			len(s.xids) == 1 && s.xids[0].GetXid() == 79 && !s.xids[0].GetAtFirstRead()
	})
	for path, s := range first {
		if at := s.xids[0].GetOccurredAt().AsTime(); at.Before(changed.Add(-time.Second)) {
			t.Errorf("%s: XID 79 stamped %v, before it appeared (%v)", path, at, changed)
		}
	}
	until("app: XID 13 WARN with its meaning, routable", "app", time.Minute, func(s xidState) bool {
		return xidRow(s, llmdiagv1.Status_STATUS_WARN) && strings.Contains(s.row.GetConclusion(), "application") && s.routable &&
			len(s.xids) == 1 && !s.xids[0].GetAtFirstRead()
	})

	// Counted again: still CRIT, stamped again.
	exporters["fault"].set(79, 2)
	again := until("fault: XID 79 counted again, still CRIT", "fault", time.Minute, func(s xidState) bool {
		return s.status == llmdiagv1.Status_STATUS_CRIT && !s.routable && len(s.xids) == 1 && s.xids[0].GetCount() == 2
	})
	for path, s := range again {
		if !s.xids[0].GetOccurredAt().AsTime().After(first[path].xids[0].GetOccurredAt().AsTime()) {
			t.Errorf("%s: the repeat kept the first stamp %v", path, s.xids[0].GetOccurredAt().AsTime())
		}
	}

	// gpu_xid_window after the repeat: graded down, routable again.
	until("fault: XID 79 aged, WARN, routable", "fault", window+time.Minute, func(s xidState) bool {
		return xidRow(s, llmdiagv1.Status_STATUS_WARN) && strings.Contains(s.row.GetConclusion(), "has not repeated") && s.routable
	})
	until("app: XID 13 aged, OK", "app", time.Minute, func(s xidState) bool {
		return xidRow(s, llmdiagv1.Status_STATUS_OK) && s.routable
	})
	until("old: still not drained", "old", time.Minute, func(s xidState) bool { return s.routable && xidRow(s, llmdiagv1.Status_STATUS_OK) })
}
