package prom

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/source"
)

// TestDCGMJoinMIG: MIG instances' series in Prometheus fold into their
// physical GPUs as scraped directly: two A100s of two instances each are
// 2 GPUs with the same figures.
func TestDCGMJoinMIG(t *testing.T) {
	const fixture = "../../engine/testdata/dcgm-a100-mig.prom"
	direct, _ := engine.ExtractGPU(dcgmFamilies(t, fixture))
	if direct.GetGpus() != 2 {
		t.Fatalf("direct read has %d GPUs, want 2", direct.GetGpus())
	}
	if g := refreshJoined(t, fixture).Metrics.GetGpu(); !proto.Equal(g, direct) {
		t.Errorf("through Prometheus\n%s\ndirect\n%s", prototext.Format(g), prototext.Format(direct))
	}
}

// TestDCGMJoinPods: two engines on one host share its exporter; the
// Hostname names both nodes, and each node's pod (Config.DCGMPods) gives
// it its own GPUs, as ExtractPodGPU does scraped directly. The GPU's pod
// is read from exported_pod when Prometheus renamed it.
func TestDCGMJoinPods(t *testing.T) {
	const fixture = "../../engine/testdata/dcgm-h100-pods.prom"
	fams := dcgmFamilies(t, fixture)
	pods := map[string]engine.DCGMPod{
		"gpu-node-12:8000": {Pod: "llama-a-0"},
		"gpu-node-12:8001": {Pod: "llama-b-0", Namespace: "inference"},
	}
	// honor_labels off: the GPU's pod and namespace become exported_*,
	// pod and namespace the exporter's own.
	renamed := func(ss []fakeSample) []fakeSample {
		for i, s := range ss {
			ls := slices.Clone(s.labels)
			for j := 0; j < len(ls); j += 2 {
				if ls[j] == "pod" || ls[j] == "namespace" {
					ls[j] = "exported_" + ls[j]
				}
			}
			ss[i].labels = append(ls, "pod", "dcgm-exporter-7xk2p", "namespace", "gpu-operator")
		}
		return ss
	}
	for _, tc := range []struct {
		name    string
		pods    map[string]engine.DCGMPod
		rename  bool
		wantGPU map[string]uint32 // GPUs by node; absent: no GPU section
	}{
		{"no pods: the host names two nodes, neither joins", nil, false, nil},
		{"pods", pods, false, map[string]uint32{"gpu-node-12:8000": 2, "gpu-node-12:8001": 1}},
		{"pods, exported_pod", pods, true, map[string]uint32{"gpu-node-12:8000": 2, "gpu-node-12:8001": 1}},
		{"one node's pod: the other still shares the host", map[string]engine.DCGMPod{"gpu-node-12:8001": {Pod: "llama-b-0", Namespace: "inference"}}, false,
			// gpu 2 is the pod's; the node without a pod takes the rest.
			map[string]uint32{"gpu-node-12:8000": 4, "gpu-node-12:8001": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			join := []string{"Hostname"}
			cfg := Config{DCGMJoin: join}
			cfg.defaults()
			ss := dcgmSamples(t, fixture)
			if tc.rename {
				ss = renamed(ss)
			}
			fake := newFakeProm(t, map[string]canned{dcgmQuery(cfg).expr: {Status: http.StatusOK, Body: vectorBody(testNow, ss)}})
			src := newTestSource(t, fake.URL, func(c *Config) { c.DCGMJoin, c.DCGMPods = join, tc.pods })
			obs := []source.Observation{
				{Node: fleet.Node{ID: "gpu-node-12:8000"}, Metrics: &llmdiagv1.NodeMetrics{}},
				{Node: fleet.Node{ID: "gpu-node-12:8001"}, Metrics: &llmdiagv1.NodeMetrics{}},
			}
			src.joinGPU(context.Background(), obs, testNow)
			for _, o := range obs {
				g := o.Metrics.GetGpu()
				want, ok := tc.wantGPU[o.Node.ID]
				if !ok {
					if g != nil {
						t.Errorf("%s got GPUs %v", o.Node.ID, g)
					}
					continue
				}
				if g.GetGpus() != want {
					t.Errorf("%s: %d GPUs, want %d", o.Node.ID, g.GetGpus(), want)
				}
				if p, ok := tc.pods[o.Node.ID]; ok {
					if d, _ := engine.ExtractPodGPU(fams, p); !proto.Equal(g, d) {
						t.Errorf("%s: through Prometheus\n%s\ndirect\n%s", o.Node.ID, prototext.Format(g), prototext.Format(d))
					}
				}
			}
		})
	}
}
