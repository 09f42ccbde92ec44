package diagnose_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestXIDGrades: an XID's grade is its catalogue severity (a reset or a
// reboot CRIT, the application's WARN, informational OK, unlisted WARN),
// graded down one level when older than gpu_xid_window, at the first read
// or unstamped; only a CRIT one makes the node not routable.
func TestXIDGrades(t *testing.T) {
	const (
		ok   = llmdiagv1.Status_STATUS_OK
		warn = llmdiagv1.Status_STATUS_WARN
		crit = llmdiagv1.Status_STATUS_CRIT
	)
	for _, tc := range []struct {
		name     string
		xid      int
		ago      time.Duration // -1: unstamped
		first    bool
		status   llmdiagv1.Status
		routable bool
		says     string
	}{
		{"79 new", 79, 0, false, crit, false, "needs a GPU reset or a reboot"},
		{"79 within the window", 79, 59 * time.Minute, false, crit, false, "needs a GPU reset or a reboot"},
		{"79 older than the window", 79, 61 * time.Minute, false, warn, true, "has not repeated"},
		{"79 at the first read", 79, 0, true, warn, true, "may be old"},
		{"79 unstamped", 79, -1, false, warn, true, "may be old"},
		{"48", 48, time.Minute, false, crit, false, "drain the node"},
		{"95", 95, time.Minute, false, crit, false, "drain the node"},
		{"119", 119, time.Minute, false, crit, false, "drain the node"},
		{"13", 13, time.Minute, false, warn, true, "the application's own GPU work"},
		{"31", 31, time.Minute, false, warn, true, "the application's own GPU work"},
		{"43", 43, time.Minute, false, warn, true, "the application's own GPU work"},
		{"31 at the first read", 31, 0, true, ok, true, "No current GPU fault"},
		{"13 older than the window", 13, 2 * time.Hour, false, ok, true, "No current GPU fault"},
		{"63", 63, time.Minute, false, ok, true, "informational"},
		{"92", 92, time.Minute, false, ok, true, "informational"},
		{"unlisted", 60001, time.Minute, false, warn, true, "not in NVIDIA's XID catalogue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := healthyMetrics()
			var at *timestamppb.Timestamp
			if tc.ago >= 0 {
				at = timestamppb.New(m.GetObservedAt().AsTime().Add(-tc.ago))
			}
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 3, tc.xid, at)
			m.Gpu.XidErrors[0].AtFirstRead = tc.first
			d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
			var row *llmdiagv1.Finding
			for _, f := range d.GetFindings() {
				if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_GPU_XID {
					row = f
				}
			}
			if row == nil || row.GetStatus() != tc.status || !strings.Contains(row.GetConclusion(), tc.says) {
				t.Errorf("XID row %v, want %v saying %q", row, tc.status, tc.says)
			}
			if d.GetRoutable() != tc.routable {
				t.Errorf("routable %v, want %v (%v / %v)", d.GetRoutable(), tc.routable, d.GetStatus(), d.GetRootCause())
			}
			if r, _ := diagnose.Routing(diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}, d, diagnose.DefaultThresholds()); r != tc.routable {
				t.Errorf("Routing: routable %v, want %v", r, tc.routable)
			}
		})
	}
}
