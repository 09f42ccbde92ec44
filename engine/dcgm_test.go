package engine

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

func f64(v float64) *float64 { return &v }
func u64(v uint64) *uint64   { return &v }

// TestExtractGPU reads the DCGM fixtures: the current exporter with the
// profiling fields on an 8-GPU H100 node decoding at high batch, and an
// older one (throttle-reasons name, no profiling fields) with a thermally
// throttled GPU, a power-capped one and an XID.
func TestExtractGPU(t *testing.T) {
	for _, tc := range []struct {
		file string
		want *llmdiagv1.GPUMetrics
	}{
		{"dcgm-h100-decode.prom", &llmdiagv1.GPUMetrics{
			Gpus: 8, ModelName: "NVIDIA H100 80GB HBM3",
			Utilization:             f64(0.9925), // (99+100+98+100+99+99+100+99)/8 %
			SmActive:                f64(0.62),   // DCGM_FI_PROF_SM_ACTIVE, not GR_ENGINE_ACTIVE
			TensorActive:            f64(0.185875),
			DramActive:              f64(0.84925),
			DramActiveMin:           f64(0.836),
			DramActiveMax:           f64(0.868),
			FramebufferUsedFraction: f64(0.908615), // GPU 6: 73288 / (73288 + 7371)
			FramebufferUsedMib:      f64(586069),
			FramebufferFreeMib:      f64(59203),
			PowerWatts:              f64(4200.2),
			SmClockMhz:              f64(1980),
			SmClockMhzMin:           f64(1980),
			TemperatureCelsiusMax:   f64(65),
			ClockEventMask:          u64(0),
			XidRead:                 true,
		}},
		{"dcgm-a100-throttled-xid.prom", &llmdiagv1.GPUMetrics{
			Gpus: 4, ModelName: "NVIDIA A100-SXM4-80GB",
			Utilization:             f64(0.9725),
			FramebufferUsedFraction: f64(0.899727),
			FramebufferUsedMib:      f64(291185),
			FramebufferFreeMib:      f64(32491),
			PowerWatts:              f64(1167.6),
			SmClockMhz:              f64(1331.25), // (3×1410 + 1095)/4
			SmClockMhzMin:           f64(1095),
			TemperatureCelsiusMax:   f64(91),
			ClockEventMask:          u64(0x64), // 0x60 on GPU 2, 0x4 on GPU 3
			ClockEventReasons:       []string{"sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown"},
			ThrottledGpus:           []string{"2", "3"},
			XidRead:                 true,
			XidErrors:               []*llmdiagv1.GPUXid{{Gpu: "1", Xid: 48, Last: true}},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			exp, err := Parse(f, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			got, warnings := ExtractGPU(exp.Families)
			if len(warnings) > 0 || len(exp.Warnings) > 0 {
				t.Errorf("warnings: %q %q", warnings, exp.Warnings)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("ExtractGPU:\n got %s\nwant %s", prototext.Format(got), prototext.Format(tc.want))
			}
			// An engine exposition has no DCGM family: no GPU section.
			if Detect(exp.Families) != llmdiagv1.Engine_ENGINE_UNSPECIFIED {
				t.Errorf("a DCGM exposition is detected as engine %v", Detect(exp.Families))
			}
		})
	}
}

func TestExtractGPUAbsent(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "vllm-dp2.prom"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exp, err := Parse(f, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := ExtractGPU(exp.Families); g != nil || len(w) > 0 {
		t.Errorf("an engine exposition gives GPU %v, warnings %q; want none", g, w)
	}
}

func TestExtractGPUProblems(t *testing.T) {
	body := `# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0"} 50
DCGM_FI_DEV_GPU_UTIL{Hostname="h"} 70
# TYPE DCGM_FI_PROF_DRAM_ACTIVE histogram
DCGM_FI_PROF_DRAM_ACTIVE_bucket{gpu="0",le="+Inf"} 1
DCGM_FI_PROF_DRAM_ACTIVE_count{gpu="0"} 1
DCGM_FI_PROF_DRAM_ACTIVE_sum{gpu="0"} 1
`
	exp, err := Parse(strings.NewReader(body), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g, w := ExtractGPU(exp.Families)
	if len(w) != 2 {
		t.Errorf("warnings = %q, want one for the series without gpu, one for the histogram", w)
	}
	want := &llmdiagv1.GPUMetrics{Gpus: 1, Utilization: f64(0.5)}
	if !proto.Equal(g, want) {
		t.Errorf("got %v, want %v", g, want)
	}
}

func TestClockEventNames(t *testing.T) {
	for _, tc := range []struct {
		mask uint64
		want []string
	}{
		{0, nil},
		{0x1, []string{"gpu_idle"}},
		{0x4 | 0x80, []string{"sw_power_cap", "hw_power_brake_slowdown"}},
		{0x60, []string{"sw_thermal_slowdown", "hw_thermal_slowdown"}},
		{0x1000, []string{"bit_0x1000"}},
	} {
		if got := ClockEventNames(tc.mask); !slices.Equal(got, tc.want) {
			t.Errorf("ClockEventNames(%#x) = %q, want %q", tc.mask, got, tc.want)
		}
	}
	if got := LimitReasons([]string{"gpu_idle", "sw_power_cap", "sync_boost", "hw_thermal_slowdown"}); !slices.Equal(got, []string{"sw_power_cap", "hw_thermal_slowdown"}) {
		t.Errorf("LimitReasons = %q", got)
	}
}

// TestAggregateGPUOrder: the figures do not depend on the readings' order
// (the Prometheus source builds them from an unordered answer).
func TestAggregateGPUOrder(t *testing.T) {
	rs := []GPUReading{
		{GPU: "10", Values: [NumGPUFields]*float64{GPUDRAM: f64(0.1), GPUXID: f64(79)}},
		{GPU: "2", Values: [NumGPUFields]*float64{GPUDRAM: f64(0.7), GPUXID: f64(0)}},
		{GPU: "1", Values: [NumGPUFields]*float64{GPUDRAM: f64(0.3), GPUXID: f64(13)}},
	}
	a := AggregateGPU(rs)
	slices.Reverse(rs)
	b := AggregateGPU(rs)
	if !proto.Equal(a, b) {
		t.Errorf("order changes the figures: %v vs %v", a, b)
	}
	if got := a.GetXidErrors(); len(got) != 2 || got[0].GetGpu() != "1" || got[1].GetGpu() != "10" {
		t.Errorf("XIDs = %v, want GPU 1 then 10 (numeric order)", got)
	}
	if AggregateGPU(nil) != nil {
		t.Error("no reading gives a GPU section")
	}
}

// TestDCGMPage: docs/engine-metrics.md names every DCGM family ExtractGPU
// reads, and no other.
func TestDCGMPage(t *testing.T) {
	page, err := os.ReadFile("../docs/engine-metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(DCGM_FI_[A-Z0-9_]+)`").FindAllStringSubmatch(string(page), -1) {
		named[m[1]] = true
	}
	read := map[string]bool{}
	for _, f := range DCGMFamilyNames() {
		read[f] = true
		if !named[f] {
			t.Errorf("docs/engine-metrics.md does not name %s, which engine/dcgm.go reads", f)
		}
	}
	for n := range named {
		if !read[n] {
			t.Errorf("docs/engine-metrics.md names %s, which engine/dcgm.go does not read", n)
		}
	}
}

// TestDCGMPageValues: docs/engine-metrics.md names every DCGM sentinel
// llmdiag reads as absent, and states each family's bounds as the code
// has them.
func TestDCGMPageValues(t *testing.T) {
	b, err := os.ReadFile("../docs/engine-metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, s := range DCGMSentinels {
		if !strings.Contains(page, "`"+s.Macro+"`") {
			t.Errorf("docs/engine-metrics.md does not name %s", s.Macro)
		}
	}
	lines := strings.Split(page, "\n")
	for f := range NumGPUFields {
		bd := DCGMBound(f)
		want := "| " + plain(bd.Min) + ".." + plain(bd.Max)
		fam := DCGMFamilies[f][0]
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| `"+fam+"`") && strings.Contains(l, "..") })
		if i < 0 {
			t.Errorf("docs/engine-metrics.md has no bounds row for %s", fam)
			continue
		}
		if !strings.Contains(lines[i], want) {
			t.Errorf("docs/engine-metrics.md's bounds of %s: %q, want %q", fam, lines[i], want)
		}
		for _, alt := range DCGMFamilies[f][1:] {
			if !strings.Contains(lines[i], "`"+alt+"`") {
				t.Errorf("the bounds row of %s does not name %s", fam, alt)
			}
		}
	}
}
