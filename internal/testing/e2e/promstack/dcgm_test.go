package promstack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
)

// dcgmFixture is a DCGM exposition of engine/testdata.
func dcgmFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "engine", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// setFamilies is body with every series of the families fams set to text.
func setFamilies(body, text string, fams ...string) string {
	for _, fam := range fams {
		re := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(fam) + `\{[^}]*\}) \S+$`)
		body = re.ReplaceAllString(body, "${1} "+text)
	}
	return body
}

// The fields each sentinel row sets, by DCGM type: the integer fields
// take DCGM's int32 and int64 sentinels, the float ones its fp64
// sentinels.
var (
	dcgmIntFields   = []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS"}
	dcgmFloatFields = []string{"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}
)

// absentFor says which of g's figures a row's sentinels must leave
// absent, and names one that is not.
func absentFor(fams []string, g *llmdiagv1.GPUMetrics) string {
	for _, fam := range fams {
		var present bool
		switch fam {
		case "DCGM_FI_DEV_GPU_UTIL":
			present = g.Utilization != nil
		case "DCGM_FI_DEV_GPU_TEMP":
			present = g.TemperatureCelsiusMax != nil
		case "DCGM_FI_DEV_SM_CLOCK":
			present = g.SmClockMhz != nil || g.SmClockMhzMin != nil
		case "DCGM_FI_DEV_FB_USED":
			present = g.FramebufferUsedMib != nil || g.FramebufferUsedFraction != nil
		case "DCGM_FI_DEV_XID_ERRORS":
			present = g.GetXidRead() || len(g.GetXidErrors()) > 0
		case "DCGM_FI_DEV_POWER_USAGE":
			present = g.PowerWatts != nil
		case "DCGM_FI_PROF_DRAM_ACTIVE":
			present = g.DramActive != nil || g.DramActiveMin != nil || g.DramActiveMax != nil
		case "DCGM_FI_PROF_SM_ACTIVE":
			present = g.SmActive != nil
		case "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
			present = g.TensorActive != nil
		}
		if present {
			return fam
		}
	}
	return ""
}

// dcgmRow is one node of TestDCGMThroughPrometheus: a healthy simulated
// vLLM node and the DCGM exposition its exporter serves.
type dcgmRow struct {
	node   string
	body   string            // the exporter's exposition; "" for a node without exporter
	labels map[string]string // the node's fleet-file labels
	gpus   uint32            // GPUs read
	absent []string          // families whose figures are absent, each named by one warning
	macro  string            // the sentinel those warnings name
	note   string            // the one other DCGM warning, "" for none
}

// dcgmRows are a node without DCGM, one node per DCGM sentinel (each
// type's blank, not found, not supported and not permissioned, on every
// GPU of the integer or the float fields), two A100s split into two MIG
// instances each, and two engines' pods sharing one exporter.
func dcgmRows(t *testing.T) (rows []dcgmRow, shared string) {
	h100 := dcgmFixture(t, "dcgm-h100-decode.prom")
	rows = append(rows, dcgmRow{node: "gpu-none"})
	for _, s := range engine.DCGMSentinels {
		var text string
		var fams []string
		switch {
		case strings.HasPrefix(s.Macro, "DCGM_INT32_"):
			// 0x7ffffff0 + 0…3, as the exporter prints an int32.
			text, fams = fmt.Sprintf("%d", int64(s.Value)), dcgmIntFields
		case strings.HasPrefix(s.Macro, "DCGM_INT64_"):
			// 0x7ffffffffffffff0 + 0…3, printed exactly (the value
			// parses to 2^63 whichever it is).
			i := map[string]int64{"DCGM_INT64_BLANK": 0, "DCGM_INT64_NOT_FOUND": 1, "DCGM_INT64_NOT_SUPPORTED": 2, "DCGM_INT64_NOT_PERMISSIONED": 3}[s.Macro]
			text, fams = fmt.Sprintf("%d", int64(0x7ffffffffffffff0)+i), dcgmIntFields
		default:
			text, fams = fmt.Sprintf("%f", s.Value), dcgmFloatFields
		}
		node := "gpu-" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.Macro, "DCGM_"), "_", "-"))
		body := strings.ReplaceAll(setFamilies(h100, text, fams...), `Hostname="gpu-node-07"`, `Hostname="`+node+`"`)
		rows = append(rows, dcgmRow{node: node, body: body, gpus: 8, absent: fams, macro: s.Macro})
	}
	// The MIG fixture's GPU 1 is power-capped with XID 79: cleared, so
	// that the node reads HEALTHY.
	mig := setFamilies(dcgmFixture(t, "dcgm-a100-mig.prom"), "0", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_XID_ERRORS")
	rows = append(rows, dcgmRow{node: "gpu-node-11", body: mig, gpus: 2,
		note: "GPU 0 from MIG instances 1 3g.40gb, 2 3g.40gb; GPU 1 from MIG instances 1 3g.40gb, 2 3g.40gb"})
	// One exporter on host gpu-node-12 serves two engines' pods (and a
	// GPU of no pod, and one of pod b in another namespace).
	shared = dcgmFixture(t, "dcgm-h100-pods.prom")
	rows = append(rows,
		dcgmRow{node: "gpu-node-12:8000", body: shared, labels: map[string]string{"pod": "llama-a-0"}, gpus: 2},
		dcgmRow{node: "gpu-node-12:8001", body: shared, labels: map[string]string{"pod": "llama-b-0", "namespace": "inference"}, gpus: 1},
	)
	return rows, shared
}

// settled: the answer is of a node that is up, HEALTHY and routable, with
// its GPUs read when it has an exporter.
func (a dcgmAnswer) settled(r dcgmRow) bool {
	return a.m.GetUp() && a.d.GetRootCause() == llmdiagv1.Cause_CAUSE_HEALTHY && a.d.GetRoutable() &&
		(r.body == "") == (a.m.GetGpu() == nil)
}

// dcgmWarnings are the answer's warnings about DCGM figures.
func (a dcgmAnswer) dcgmWarnings() []string {
	var out []string
	for _, w := range a.m.GetWarnings() {
		if strings.Contains(w, "DCGM f") {
			out = append(out, w)
		}
	}
	return out
}

// TestDCGMThroughPrometheus is the DCGM join accepted as a user runs it:
// healthy simulated vLLM nodes, each beside a DCGM exporter serving a
// chosen exposition, read by one llmdiag scraping them directly (the
// fleet file's url and dcgm) and by one reading a real Prometheus that
// scrapes them every second (`--prometheus-dcgm-join Hostname`, nodes
// named by a `node` target label). Both must answer the same: each DCGM
// sentinel of each type read as absent, with one warning per field, the
// node still HEALTHY and routable; MIG instances folded into their 2
// physical GPUs; and on a host whose one exporter serves two engines'
// pods, each node its own pod's GPUs. Prometheus scrapes the shared
// exporter as a Kubernetes service discovery target is scraped by
// default: the target carries the exporter's own pod and namespace and
// honor_labels is false, so the GPUs' pod and namespace arrive as
// exported_pod and exported_namespace.
func TestDCGMThroughPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve reading a real Prometheus beside a direct scrape")
	}
	start := time.Now()
	rows, shared := dcgmRows(t)

	var ids []string
	for _, r := range rows {
		ids = append(ids, r.node)
	}
	simFleet := vllmNodes(t, ids...)

	// The exporters: one per exposition.
	exporters := map[string]string{} // exposition → host:port
	for _, r := range rows {
		if r.body == "" || exporters[r.body] != "" {
			continue
		}
		body := r.body
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		exporters[body] = strings.TrimPrefix(srv.URL, "http://")
	}

	// Direct: the fleet file with each node's url and dcgm. From
	// Prometheus: the same nodes without urls (profiles and pod labels
	// only), Prometheus scraping the engines (target label node) and the
	// exporters.
	direct, fromProm := &fleet.File{}, &fleet.File{}
	var targets []string
	targetLabels := map[string]map[string]string{}
	for i, n := range simFleet.FleetFile().Nodes {
		r := rows[i]
		n.Labels = r.labels
		n.DCGM = ""
		if r.body != "" {
			n.DCGM = "http://" + exporters[r.body] + "/metrics"
		}
		direct.Nodes = append(direct.Nodes, n)
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u.Host)
		targetLabels[u.Host] = map[string]string{"node": n.ID}
		n.URL, n.DCGM = "", ""
		fromProm.Nodes = append(fromProm.Nodes, n)
	}
	for body, addr := range exporters {
		targets = append(targets, addr)
		if body == shared {
			targetLabels[addr] = map[string]string{"pod": "dcgm-exporter-7xk2p", "namespace": "gpu-operator"}
		}
	}
	prom := promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: targetLabels, ScrapeInterval: time.Second})
	clients := servePair(t, direct, fromProm, prom.URL(), "Hostname")

	// Wait until each node has been read up, HEALTHY and routable, its
	// GPUs read where it has an exporter, by both; keep that answer. A
	// light node's latency trend is noisy in its first minute: each node
	// settles on its own. No answer on the way has a GPU row that is not
	// OK: no sentinel ever reads as an XID or a throttled GPU.
	answers := map[string]map[string]dcgmAnswer{"direct": {}, "prometheus": {}}
	var last string
	gpuOff := map[string]bool{}
	read := func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		done := true
		for path, c := range clients {
			for _, r := range rows {
				if _, ok := answers[path][r.node]; ok {
					continue
				}
				a, err := ask(ctx, c, r.node)
				if err != nil {
					last, done = fmt.Sprintf("%s %s: %v", path, r.node, err), false
					continue
				}
				var off []string
				for _, f := range a.d.GetFindings() {
					if f.GetStatus() != llmdiagv1.Status_STATUS_OK {
						off = append(off, fmt.Sprintf("%v %v %s: %s", f.GetIndicator(), f.GetStatus(), f.GetValue(), f.GetConclusion()))
					}
					if gpuRow(f.GetIndicator()) && f.GetStatus() != llmdiagv1.Status_STATUS_OK && !gpuOff[path+r.node] {
						gpuOff[path+r.node] = true
						t.Errorf("%s %s: GPU row %v %v %s", path, r.node, f.GetIndicator(), f.GetStatus(), f.GetValue())
					}
				}
				if !a.settled(r) {
					last, done = fmt.Sprintf("%s %s: up %v, %v %v routable %v, GPUs %v, findings not OK %q, warnings %q", path, r.node, a.m.GetUp(),
						a.d.GetStatus(), a.d.GetRootCause(), a.d.GetRoutable(), a.m.GetGpu().GetGpus(), off, a.m.GetWarnings()), false
					continue
				}
				answers[path][r.node] = a
			}
		}
		return done
	}
	clitest.WaitFor(t, "every node up, HEALTHY, routable and its GPUs read, scraped directly and through Prometheus", 2*time.Minute, read, &last)
	t.Logf("settled %v after the start", time.Since(start).Round(10*time.Millisecond))

	// The shared exporter's pods reached Prometheus renamed, as the
	// Prometheus path reads them.
	if vec, err := prom.QueryVector(t.Context(), `count(DCGM_FI_DEV_GPU_UTIL{exported_pod="llama-a-0",pod="dcgm-exporter-7xk2p"})`, time.Now()); err != nil || len(vec) != 1 || vec[0].Value != 2 {
		t.Errorf("the shared exporter's GPUs of pod llama-a-0 in Prometheus: %v, %v; want 2 series with exported_pod", vec, err)
	}

	for _, r := range rows {
		t.Run(r.node, func(t *testing.T) {
			d, p := answers["direct"][r.node], answers["prometheus"][r.node]
			if !proto.Equal(d.m.GetGpu(), p.m.GetGpu()) {
				t.Errorf("GPU section through Prometheus\n%s\nscraped directly\n%s", prototext.Format(p.m.GetGpu()), prototext.Format(d.m.GetGpu()))
			}
			for path, a := range map[string]dcgmAnswer{"direct": d, "prometheus": p} {
				g := a.m.GetGpu()
				if g.GetGpus() != r.gpus {
					t.Errorf("%s: %d GPUs, want %d", path, g.GetGpus(), r.gpus)
				}
				if fam := absentFor(r.absent, g); fam != "" {
					t.Errorf("%s: %s's sentinel reads as a figure: %s", path, fam, prototext.Format(g))
				}
				ws := a.dcgmWarnings()
				for _, fam := range r.absent {
					n := 0
					for _, w := range ws {
						if strings.Contains(w, "DCGM family "+fam+" reports ") && strings.Contains(w, r.macro) && strings.Contains(w, "every GPU") {
							n++
						}
					}
					if n != 1 {
						t.Errorf("%s: %d warnings name %s's %s on every GPU, want 1: %q", path, n, fam, r.macro, ws)
					}
				}
				want := len(r.absent)
				if r.note != "" {
					want++
					if !strings.Contains(strings.Join(ws, "\n"), r.note) {
						t.Errorf("%s: warnings %q lack %q", path, ws, r.note)
					}
				}
				if len(ws) != want {
					t.Errorf("%s: DCGM warnings %q, want %d", path, ws, want)
				}
				for _, f := range a.d.GetFindings() {
					if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_GPU_XID && !g.GetXidRead() {
						t.Errorf("%s: an XID row without an XID read: %v", path, f)
					}
				}
			}
			// Both name the same fields and GPUs in their warnings (each
			// path prefixes them its own way).
			if dw, pw := trimDCGM(d.dcgmWarnings()), trimDCGM(p.dcgmWarnings()); strings.Join(dw, "\n") != strings.Join(pw, "\n") {
				t.Errorf("DCGM warnings differ:\nscraped directly %q\nthrough Prometheus %q", dw, pw)
			}
			if d.d.GetStatus() != p.d.GetStatus() || d.d.GetRootCause() != p.d.GetRootCause() || d.d.GetRoutable() != p.d.GetRoutable() {
				t.Errorf("verdicts differ: direct %v %v routable %v, Prometheus %v %v routable %v", d.d.GetStatus(), d.d.GetRootCause(), d.d.GetRoutable(),
					p.d.GetStatus(), p.d.GetRootCause(), p.d.GetRoutable())
			}
		})
	}
	t.Logf("took %v", time.Since(start).Round(10*time.Millisecond))
}

// gpuRow: ind is one of the GPU rows of a diagnosis.
func gpuRow(ind llmdiagv1.Indicator) bool {
	return ind == llmdiagv1.Indicator_INDICATOR_GPU_ACTIVITY || ind == llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING ||
		ind == llmdiagv1.Indicator_INDICATOR_GPU_XID
}

// trimDCGM drops each warning's prefix up to "DCGM family" or "DCGM
// figures", where the paths differ (the exporter's URL, or "dcgm:").
func trimDCGM(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		if j := strings.Index(w, "DCGM f"); j >= 0 {
			w = w[j:]
		}
		out[i] = w
	}
	return out
}
