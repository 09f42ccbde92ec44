package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

func readFixture(t *testing.T, name string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exp, err := Parse(f, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.Warnings) > 0 {
		t.Fatalf("%s: %q", name, exp.Warnings)
	}
	return exp.Families
}

// TestExtractGPUMIG: two A100s, each split into two MIG instances, read as
// two GPUs: activities the mean of each GPU's instances, framebuffer their
// sum, power, clock, temperature, clock events and XID the GPU's (which
// each instance repeats), named by the physical GPU.
func TestExtractGPUMIG(t *testing.T) {
	want := &llmdiagv1.GPUMetrics{
		Gpus: 2, ModelName: "NVIDIA A100-SXM4-80GB",
		SmActive:                f64(0.4),  // GPU 0 (0.6+0.2)/2, GPU 1 (0.5+0.3)/2
		TensorActive:            f64(0.15), // GPU 0 0.2, GPU 1 0.1
		DramActive:              f64(0.4),  // GPU 0 0.5, GPU 1 0.3
		DramActiveMin:           f64(0.3),
		DramActiveMax:           f64(0.5),
		FramebufferUsedMib:      f64(65000), // 30000+10000 + 20000+5000
		FramebufferFreeMib:      f64(96800),
		FramebufferUsedFraction: f64(0.494438), // GPU 0: 40000 / 80900
		PowerWatts:              f64(430.75),   // 250.5 + 180.25, not each instance's repeat
		SmClockMhz:              f64(1342.5),
		SmClockMhzMin:           f64(1275),
		TemperatureCelsiusMax:   f64(66),
		ClockEventMask:          u64(0x4),
		ClockEventReasons:       []string{"sw_power_cap"},
		ThrottledGpus:           []string{"1"},
		XidRead:                 true,
		XidErrors:               []*llmdiagv1.GPUXid{{Gpu: "1", Xid: 79, Last: true}},
	}
	got, warnings := ExtractGPU(readFixture(t, "dcgm-a100-mig.prom"))
	if !proto.Equal(got, want) {
		t.Errorf("ExtractGPU:\n got %s\nwant %s", prototext.Format(got), prototext.Format(want))
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "GPU 0 from MIG instances 1 3g.40gb, 2 3g.40gb; GPU 1 from MIG instances 1 3g.40gb, 2 3g.40gb") {
		t.Errorf("warnings %q: want one naming each GPU's instances", warnings)
	}
}

// A physical GPU's own series wins over its instances' for every field;
// the instances fill only the fields it lacks.
func TestGPUFromSeriesMIGOwnSeries(t *testing.T) {
	ss := []DCGMSeries{
		{Family: "DCGM_FI_DEV_GPU_TEMP", GPU: "0", UUID: "U0", Value: 70},
		{Family: "DCGM_FI_DEV_GPU_TEMP", GPU: "0", UUID: "U0", Instance: "1", Value: 90},
		{Family: "DCGM_FI_DEV_FB_USED", GPU: "0", UUID: "U0", Value: 1000},
		{Family: "DCGM_FI_DEV_FB_USED", GPU: "0", UUID: "U0", Instance: "1", Value: 300},
		{Family: "DCGM_FI_DEV_FB_USED", GPU: "0", UUID: "U0", Instance: "2", Value: 400},
		{Family: "DCGM_FI_DEV_POWER_USAGE", GPU: "0", UUID: "U0", Instance: "1", Value: 200},
		{Family: "DCGM_FI_DEV_POWER_USAGE", GPU: "0", UUID: "U0", Instance: "2", Value: 210},
		{Family: "DCGM_FI_DEV_GPU_UTIL", GPU: "0", UUID: "U0", Instance: "1", Value: 20},
		{Family: "DCGM_FI_DEV_GPU_UTIL", GPU: "0", UUID: "U0", Instance: "2", Value: 60},
		{Family: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", GPU: "0", UUID: "U0", Instance: "1", Value: 0x1},
		{Family: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", GPU: "0", UUID: "U0", Instance: "2", Value: 0x40},
		{Family: "DCGM_FI_DEV_GPU_UTIL", GPU: "1", UUID: "U1", Value: 50},
	}
	g, warnings := GPUFromSeries(ss)
	if g.GetGpus() != 2 {
		t.Errorf("gpus %d, want 2", g.GetGpus())
	}
	if v := g.GetTemperatureCelsiusMax(); v != 70 {
		t.Errorf("temperature %v, want GPU 0's own 70, not instance 1's 90", v)
	}
	if v := g.GetFramebufferUsedMib(); v != 1000 {
		t.Errorf("framebuffer used %v, want GPU 0's own 1000, not plus its instances'", v)
	}
	if v := g.GetPowerWatts(); v != 210 {
		t.Errorf("power %v, want the highest instance's 210", v)
	}
	if v := g.GetUtilization(); v != 0.45 { // GPU 0 (20+60)/2 %, GPU 1 50 %
		t.Errorf("utilization %v, want 0.45", v)
	}
	if m := g.GetClockEventMask(); m != 0x41 || !slices.Equal(g.GetThrottledGpus(), []string{"0"}) {
		t.Errorf("clock events %#x on %q, want 0x41 on GPU 0", m, g.GetThrottledGpus())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "GPU 0 from MIG instances 1, 2") || strings.Contains(warnings[0], "GPU 1") {
		t.Errorf("warnings %q: want one naming GPU 0's instances only", warnings)
	}
}

// TestExtractPodGPU: one exporter serving two engines' pods gives each
// node its own pod's GPUs; a node without a pod label keeps them all.
func TestExtractPodGPU(t *testing.T) {
	fams := readFixture(t, "dcgm-h100-pods.prom")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		gpus   uint32
		power  float64 // sum over the kept GPUs
		warn   string
	}{
		{"no pod label: every GPU", map[string]string{"team": "x"}, 5, 1670, ""},
		{"pod a", map[string]string{"pod": "llama-a-0"}, 2, 1180, ""},
		{"pod b in inference", map[string]string{"pod": "llama-b-0", "namespace": "inference"}, 1, 300, ""},
		{"pod b in any namespace", map[string]string{"pod": "llama-b-0"}, 2, 420, ""},
		{"pod elsewhere", map[string]string{"pod": "gone-0", "namespace": "inference"}, 0, 0, "no DCGM series of pod inference/gone-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, warnings := ExtractPodGPU(fams, NodePod(tc.labels))
			if g.GetGpus() != tc.gpus || g.GetPowerWatts() != tc.power {
				t.Errorf("%d GPUs, %v W; want %d, %v", g.GetGpus(), g.GetPowerWatts(), tc.gpus, tc.power)
			}
			w := strings.Join(warnings, "\n")
			if tc.warn == "" && w != "" || !strings.Contains(w, tc.warn) {
				t.Errorf("warnings %q, want %q", warnings, tc.warn)
			}
		})
	}
	// Without a pod, ExtractPodGPU is ExtractGPU.
	all, _ := ExtractGPU(fams)
	if g, _ := ExtractPodGPU(fams, DCGMPod{}); !proto.Equal(g, all) {
		t.Errorf("zero DCGMPod differs from ExtractGPU")
	}
}
