package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// readDCGM parses an exposition and reads its GPUs.
func readDCGM(t *testing.T, body string) (*llmdiagv1.GPUMetrics, []string) {
	t.Helper()
	exp, err := Parse(strings.NewReader(body), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.Warnings) > 0 {
		t.Fatalf("parse warnings %q", exp.Warnings)
	}
	return ExtractGPU(exp.Families)
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withValue is body with every series of family fam set to text on the
// GPUs gpus (all when none is given).
func withValue(body, fam, text string, gpus ...string) string {
	re := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(fam) + `\{gpu="([^"]*)"[^}]*\}) \S+$`)
	return re.ReplaceAllStringFunc(body, func(line string) string {
		m := re.FindStringSubmatch(line)
		if len(gpus) > 0 && !strings.Contains(","+strings.Join(gpus, ",")+",", ","+m[2]+",") {
			return line
		}
		return m[1] + " " + text
	})
}

// sentinelTexts are each DCGM sentinel as an exporter prints it: the
// integer ones as integers, the fp64 ones as integers and with six
// decimals.
func sentinelTexts(fp64 bool) map[string]string {
	out := map[string]string{}
	for i := range int64(4) {
		out[DCGMSentinels[i].Macro] = strconv.FormatInt(0x7ffffff0+i, 10)
		out[DCGMSentinels[4+i].Macro] = strconv.FormatInt(0x7ffffffffffffff0+i, 10)
		out[DCGMSentinels[8+i].Macro] = fmt.Sprintf("%d", int64(1)<<47+i)
		out[DCGMSentinels[8+i].Macro+" %f"] = fmt.Sprintf("%f", float64(int64(1)<<47+i))
	}
	// At or above its type's BLANK: blank too.
	if fp64 {
		out["above DCGM_FP64_BLANK"] = "281474976710656"
	} else {
		out["above DCGM_INT64_BLANK"] = "1.5e19"
	}
	return out
}

// dcgmFigures are, for the representative fields, whether GPUMetrics
// holds a figure read from them.
var dcgmFigures = map[string]func(*llmdiagv1.GPUMetrics) bool{
	"DCGM_FI_DEV_XID_ERRORS": func(g *llmdiagv1.GPUMetrics) bool {
		return g.GetXidRead() || len(g.GetXidErrors()) > 0
	},
	"DCGM_FI_DEV_GPU_TEMP": func(g *llmdiagv1.GPUMetrics) bool { return g.TemperatureCelsiusMax != nil },
	"DCGM_FI_PROF_DRAM_ACTIVE": func(g *llmdiagv1.GPUMetrics) bool {
		return g.DramActive != nil || g.DramActiveMin != nil || g.DramActiveMax != nil
	},
	"DCGM_FI_DEV_GPU_UTIL":    func(g *llmdiagv1.GPUMetrics) bool { return g.Utilization != nil },
	"DCGM_FI_DEV_POWER_USAGE": func(g *llmdiagv1.GPUMetrics) bool { return g.PowerWatts != nil },
}

// TestDCGMSentinelsAbsent: each DCGM sentinel of each type, reported by
// every GPU for a field, leaves the field's figure absent, with one
// warning that names the field and the sentinel; the other figures stay.
func TestDCGMSentinelsAbsent(t *testing.T) {
	base := fixture(t, "dcgm-h100-decode.prom")
	plain, _ := readDCGM(t, base)
	for fam, has := range dcgmFigures {
		if !has(plain) {
			t.Fatalf("the fixture has no figure of %s", fam)
		}
		fp64 := fam == "DCGM_FI_PROF_DRAM_ACTIVE" || fam == "DCGM_FI_DEV_POWER_USAGE"
		for name, text := range sentinelTexts(fp64) {
			t.Run(fam+"/"+name, func(t *testing.T) {
				body := withValue(base, fam, text)
				if body == base {
					t.Fatalf("no series of %s replaced", fam)
				}
				g, w := readDCGM(t, body)
				if g == nil {
					t.Fatal("no GPU section")
				}
				if has(g) {
					t.Errorf("%s at %s gives a figure: %s", fam, text, prototext.Format(g))
				}
				if g.GetGpus() != 8 || g.GetSmClockMhz() != 1980 {
					t.Errorf("the other figures changed: %s", prototext.Format(g))
				}
				if len(w) != 1 || !strings.Contains(w[0], fam) || !strings.Contains(w[0], "every GPU") {
					t.Fatalf("warnings %q, want one naming %s on every GPU", w, fam)
				}
				macro := strings.TrimSuffix(strings.TrimPrefix(name, "above "), " %f")
				if !strings.Contains(w[0], macro) {
					t.Errorf("warning %q does not name %s", w[0], macro)
				}
			})
		}
	}
}

// TestDCGMSentinelSomeGPUs: a sentinel on some GPUs leaves those out of
// the figure, the others in, and the warning names them.
func TestDCGMSentinelSomeGPUs(t *testing.T) {
	body := withValue(fixture(t, "dcgm-a100-throttled-xid.prom"), "DCGM_FI_DEV_GPU_TEMP", "9223372036854775794", "2", "0")
	g, w := readDCGM(t, body)
	if got := g.GetTemperatureCelsiusMax(); got != 68 { // GPU 2's 91 is left out
		t.Errorf("hottest GPU %v, want 68", got)
	}
	want := "DCGM family DCGM_FI_DEV_GPU_TEMP reports DCGM_INT64_BLANK, DCGM_INT64_NOT_FOUND, DCGM_INT64_NOT_SUPPORTED, DCGM_INT64_NOT_PERMISSIONED (blank, not found, not supported or not permissioned: as a float64 they are one number) on 2 of 4 GPUs (0, 2): read as absent"
	if len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want %q", w, want)
	}
}

// TestDCGMNotSupportedFixture: an exporter on GPUs that support neither
// the temperature, the XID nor the DRAM field (the exporter's own sample
// output shows DCGM_FI_DEV_MEMORY_TEMP at 9223372036854775794): those
// figures are absent, not XID 4294967295 nor 9.2e18 °C, and each field is
// named once.
func TestDCGMNotSupportedFixture(t *testing.T) {
	g, w := readDCGM(t, fixture(t, "dcgm-l40s-not-supported.prom"))
	want := &llmdiagv1.GPUMetrics{
		Gpus: 2, ModelName: "NVIDIA L40S",
		Utilization:             f64(0.475),
		SmActive:                f64(0.4335),
		FramebufferUsedMib:      f64(73080),
		FramebufferFreeMib:      f64(18112),
		FramebufferUsedFraction: f64(0.802351), // GPU 0: 36584 / 45596
		PowerWatts:              f64(460.3),
		SmClockMhz:              f64(2040),
		SmClockMhzMin:           f64(2040),
		ClockEventMask:          u64(0),
	}
	if !proto.Equal(g, want) {
		t.Errorf("got\n%s\nwant\n%s", prototext.Format(g), prototext.Format(want))
	}
	for _, fam := range []string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_DRAM_ACTIVE"} {
		n := 0
		for _, x := range w {
			if strings.Contains(x, fam) && strings.Contains(x, "every GPU") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings name %s on every GPU, want 1: %q", n, fam, w)
		}
	}
	if len(w) != 3 {
		t.Errorf("warnings %q, want 3", w)
	}
	if !strings.Contains(strings.Join(w, "\n"), "DCGM_FP64_NOT_SUPPORTED (not supported)") {
		t.Errorf("the DRAM warning does not name DCGM_FP64_NOT_SUPPORTED: %q", w)
	}
}

// TestDCGMImplausible: a value outside its field's bounds is absent, with
// a warning naming the field, the GPU and the value.
func TestDCGMImplausible(t *testing.T) {
	base := fixture(t, "dcgm-a100-throttled-xid.prom")
	for _, tc := range []struct {
		fam, gpu, text string
		absent         func(*llmdiagv1.GPUMetrics) bool // the bad value is not in the figure
	}{
		{"DCGM_FI_DEV_GPU_TEMP", "1", "9000", func(g *llmdiagv1.GPUMetrics) bool { return g.GetTemperatureCelsiusMax() == 91 }},
		{"DCGM_FI_DEV_GPU_TEMP", "1", "-273", func(g *llmdiagv1.GPUMetrics) bool { return g.GetTemperatureCelsiusMax() == 91 }},
		{"DCGM_FI_DEV_GPU_UTIL", "0", "250", func(g *llmdiagv1.GPUMetrics) bool { return g.GetUtilization() == 0.973333 }}, // (97+99+96)/3 %, without GPU 0
		{"DCGM_FI_DEV_POWER_USAGE", "3", "-12", func(g *llmdiagv1.GPUMetrics) bool { return g.GetPowerWatts() > 0 && g.GetPowerWatts() < 1167.6 }},
		{"DCGM_FI_DEV_SM_CLOCK", "2", "1000000", func(g *llmdiagv1.GPUMetrics) bool { return g.GetSmClockMhzMin() == 1410 }},
		{"DCGM_FI_DEV_FB_USED", "0", "1000000000", func(g *llmdiagv1.GPUMetrics) bool { return g.GetFramebufferUsedMib() < 1e6 }},
		{"DCGM_FI_DEV_XID_ERRORS", "1", "4294967295", func(g *llmdiagv1.GPUMetrics) bool { return len(g.GetXidErrors()) == 0 }},
	} {
		t.Run(tc.fam+"="+tc.text, func(t *testing.T) {
			g, w := readDCGM(t, withValue(base, tc.fam, tc.text, tc.gpu))
			if !tc.absent(g) {
				t.Errorf("%s %s on GPU %s reaches the figures: %s", tc.fam, tc.text, tc.gpu, prototext.Format(g))
			}
			if len(w) != 1 || !strings.Contains(w[0], tc.fam) || !strings.Contains(w[0], "GPU "+tc.gpu+" ") || !strings.Contains(w[0], " "+tc.text+",") {
				t.Errorf("warnings %q, want one naming %s, GPU %s and %s", w, tc.fam, tc.gpu, tc.text)
			}
		})
	}
	// The activity ratios are 0..1.
	g, w := readDCGM(t, withValue(fixture(t, "dcgm-h100-decode.prom"), "DCGM_FI_PROF_DRAM_ACTIVE", "1.5", "4"))
	if g.GetDramActiveMax() != 0.868 || len(w) != 1 || !strings.Contains(w[0], "GPU 4 is 1.5, outside 0..1") {
		t.Errorf("DRAM active 1.5: max %v, warnings %q", g.GetDramActiveMax(), w)
	}
}

// TestDCGMSentinelTable: the int64 sentinels parse as the exporter's text
// does (to 2^63), the others exactly.
func TestDCGMSentinelTable(t *testing.T) {
	for _, s := range DCGMSentinels {
		if strings.HasPrefix(s.Macro, "DCGM_INT64_") && s.Value != math.Exp2(63) {
			t.Errorf("%s = %v, want 2^63", s.Macro, s.Value)
		}
	}
	if v, _ := strconv.ParseFloat("9223372036854775794", 64); dcgmSentinel(GPUXID, v) == "" {
		t.Error("9223372036854775794 is not a sentinel")
	}
	for _, v := range []float64{0, 48, 91, 0x7fffffef, 1 << 46} {
		if s := dcgmSentinel(GPUTemp, v); s != "" {
			t.Errorf("%v reads as %s", v, s)
		}
	}
}

// TestAggregateGPUNoClampedXID: an XID reading too large for a uint32
// (DCGM's int64 sentinel, were it to reach AggregateGPU) is no XID, never
// XID 4294967295.
func TestAggregateGPUNoClampedXID(t *testing.T) {
	g := AggregateGPU([]GPUReading{
		{GPU: "0", Values: [NumGPUFields]*float64{GPUXID: f64(math.Exp2(63))}},
		{GPU: "1", Values: [NumGPUFields]*float64{GPUXID: f64(79)}},
	})
	if x := g.GetXidErrors(); len(x) != 1 || x[0].GetGpu() != "1" || x[0].GetXid() != 79 {
		t.Errorf("XIDs %v, want only GPU 1's 79", x)
	}
}
