package diagnose_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// dcgmExposition is the DCGM fixture file of engine/testdata with every
// series of each family of set set to its text.
func dcgmExposition(t *testing.T, file string, set map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "engine", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	for fam, text := range set {
		re := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(fam) + `\{[^}]*\}) \S+$`)
		if !re.MatchString(body) {
			t.Fatalf("%s has no series of %s", file, fam)
		}
		body = re.ReplaceAllString(body, "${1} "+text)
	}
	return body
}

// readGPU is what engine reads of a DCGM exposition: the GPU section a
// node's metrics carry.
func readGPU(t *testing.T, body string) *llmdiagv1.GPUMetrics {
	t.Helper()
	exp, err := engine.Parse(strings.NewReader(body), engine.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := engine.ExtractGPU(exp.Families)
	if g == nil {
		t.Fatal("no GPU section")
	}
	return g
}

// gpuSubjects are the GPU claims' subjects (GPUClaims) and whether g has
// the figure each is about.
func gpuSubjects(g *llmdiagv1.GPUMetrics) map[string]bool {
	activity := g.SmActive != nil || g.TensorActive != nil || g.DramActive != nil || g.Utilization != nil
	return map[string]bool{
		"GPU DRAM active":   g.DramActive != nil,
		"GPU tensor active": g.TensorActive != nil,
		"GPU starved":       activity,
		"GPU throttling":    g.ClockEventMask != nil,
		"GPU XID":           g.GetXidRead(),
	}
}

// dcgmFloat: the DCGM field family fam holds fp64 values (the others
// llmdiag reads hold int64).
func dcgmFloat(fam string) bool {
	return strings.HasPrefix(fam, "DCGM_FI_PROF_") || fam == "DCGM_FI_DEV_POWER_USAGE"
}

// TestNoGPUClaimFromAbsentFigures: the chain from an exposition to what
// a diagnosis says. A DCGM field reported as one of DCGM's sentinels (each
// of its type, on every GPU), or as a value no GPU reports, is read by
// engine as absent, and the diagnosis of a node whose GPU section engine
// read so makes no claim about it (activity, bandwidth- or compute-bound,
// starved, throttling, XID), in either language, and has no GPU row it
// would feed. A claim that the figure is unknown is allowed. The same
// exposition with the field's figure does make the claim, so the test
// cannot pass by making none.
func TestNoGPUClaimFromAbsentFigures(t *testing.T) {
	th := diagnose.DefaultThresholds()
	// Each sentinel as the exporter prints it, by DCGM type.
	var ints, floats []string
	for i, s := range engine.DCGMSentinels {
		switch {
		case strings.HasPrefix(s.Macro, "DCGM_INT32_"):
			ints = append(ints, fmt.Sprintf("%d", int64(s.Value)))
		case strings.HasPrefix(s.Macro, "DCGM_INT64_"):
			ints = append(ints, fmt.Sprintf("%d", int64(0x7ffffffffffffff0)+int64(i%4)))
		default:
			floats = append(floats, fmt.Sprintf("%f", s.Value))
		}
	}
	activity := []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"}
	for _, group := range []struct {
		name string
		file string            // the exposition
		base map[string]string // set first: the exposition then makes the claim
		fams []string          // the families set, each to a sentinel of its type
		// bad are values no GPU reports, one case each, set on every
		// family.
		bad []string
		// claim is made from the exposition with base, and never once
		// the families are set.
		claim string
	}{
		// Decoding at the memory-bandwidth limit (DRAM ~85%).
		{"DRAM activity", "dcgm-h100-decode.prom", nil, []string{"DCGM_FI_PROF_DRAM_ACTIVE"}, []string{"1.5", "-0.2"}, "GPU DRAM active"},
		// Compute-bound: tensor pipes at 50%, DRAM at 30%.
		{"tensor activity", "dcgm-h100-decode.prom",
			map[string]string{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "0.5", "DCGM_FI_PROF_DRAM_ACTIVE": "0.3"},
			[]string{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}, []string{"7"}, "GPU tensor active"},
		// Starved: SMs, tensor pipes and DRAM mostly idle.
		{"every activity and utilisation", "dcgm-h100-decode.prom",
			map[string]string{"DCGM_FI_PROF_SM_ACTIVE": "0.2", "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "0.2", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "0.05", "DCGM_FI_PROF_DRAM_ACTIVE": "0.1", "DCGM_FI_DEV_GPU_UTIL": "40"},
			append(activity, "DCGM_FI_DEV_GPU_UTIL"), []string{"250"}, "GPU starved"},
		// GPU 2 thermally throttled, GPU 3 power-capped; GPU 1's last XID 48.
		{"clock events", "dcgm-a100-throttled-xid.prom", nil, []string{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}, []string{"1e10"}, "GPU throttling"},
		{"XID", "dcgm-a100-throttled-xid.prom", nil, []string{"DCGM_FI_DEV_XID_ERRORS"}, []string{"4294967295", "70000"}, "GPU XID"},
	} {
		// The cases: each sentinel of each family's type, then each bad
		// value.
		var cases []map[string]string
		for i := range max(len(ints), len(floats)) {
			c := map[string]string{}
			for _, fam := range group.fams {
				texts := ints
				if dcgmFloat(fam) {
					texts = floats
				}
				c[fam] = texts[i%len(texts)]
			}
			cases = append(cases, c)
		}
		for _, b := range group.bad {
			c := map[string]string{}
			for _, fam := range group.fams {
				c[fam] = b
			}
			cases = append(cases, c)
		}
		for _, v := range []struct {
			name string
			in   func() diagnose.Input
		}{
			{"seed decode-bound", diagnosetest.SeedGPUInput},
			{"healthy", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} }},
		} {
			t.Run(group.name+"/"+v.name, func(t *testing.T) {
				with := func(g *llmdiagv1.GPUMetrics) diagnose.Input {
					in := v.in()
					in.Metrics = proto.Clone(in.Metrics).(*llmdiagv1.NodeMetrics)
					in.Metrics.Gpu = g
					return in
				}
				// The control: as exported, the figure is read and
				// claimed about.
				base := readGPU(t, dcgmExposition(t, group.file, group.base))
				if !gpuSubjects(base)[group.claim] {
					t.Fatalf("%s has no figure of %s", group.file, group.claim)
				}
				if cs := diagnose.GPUClaims(with(base), th, llmdiagv1.Language_LANGUAGE_EN); !claims(cs, group.claim) {
					t.Fatalf("from %s as exported, no %s claim: %q", group.file, group.claim, cs)
				}
				for _, c := range cases {
					what := fmt.Sprint(c)
					set := maps.Clone(group.base)
					if set == nil {
						set = map[string]string{}
					}
					maps.Copy(set, c)
					g := readGPU(t, dcgmExposition(t, group.file, set))
					has := gpuSubjects(g)
					if has[group.claim] {
						t.Errorf("%s: engine reads a figure of %s", what, group.claim)
					}
					for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
						in := with(g)
						for _, cl := range diagnose.GPUClaims(in, th, lang) {
							for subject, known := range has {
								if !known && strings.HasPrefix(cl, subject+" ") && !strings.HasSuffix(cl, " unknown") {
									t.Errorf("%s, %v: claim %q of an absent figure", what, lang, cl)
								}
							}
						}
						if r := diagnose.CheckClaims(in, th, lang); len(r.Violations) > 0 {
							t.Errorf("%s, %v: %q", what, lang, r.Violations)
						}
						for _, f := range diagnose.Diagnose(in, th, lang).GetFindings() {
							row := map[llmdiagv1.Indicator]string{
								llmdiagv1.Indicator_INDICATOR_GPU_ACTIVITY:   "GPU starved",
								llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING: "GPU throttling",
								llmdiagv1.Indicator_INDICATOR_GPU_XID:        "GPU XID",
							}[f.GetIndicator()]
							if row != "" && !has[row] {
								t.Errorf("%s, %v: a %v row (%v %s) without its figure", what, lang, f.GetIndicator(), f.GetStatus(), f.GetValue())
							}
						}
					}
				}
			})
		}
	}
}

// claims reports whether cs holds a claim about subject that is not
// "unknown".
func claims(cs []string, subject string) bool {
	for _, c := range cs {
		if strings.HasPrefix(c, subject+" ") && !strings.HasSuffix(c, " unknown") {
			return true
		}
	}
	return false
}
