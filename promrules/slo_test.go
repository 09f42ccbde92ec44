package promrules_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/promrules"
	"github.com/llmdiag/llmdiag/sample"
)

// sloEval is the minute SLO cases are judged at: past the longest burn
// window (6h), so every window lies inside the series. Series are sampled
// and rules evaluated every sloStep minutes, a divisor of every window and
// phase, which keeps promtool's run short.
const (
	sloEval = 370
	sloStep = 5
)

// phase is a stretch of minutes during which a TTFT histogram grows by
// perMin observations a minute in each bucket of ttftBounds.
type phase struct {
	minutes int
	perMin  []float64
}

// sloCase is one node exporting TTFT buckets phase after phase up to
// sloEval, and the SLO finding status it must come out with.
type sloCase struct {
	name   string
	engine string
	phases []phase
	want   llmdiagv1.Status
}

// cumAt is the cumulative count per bucket at minute i.
func (c sloCase) cumAt(i int) []float64 {
	out := make([]float64, len(ttftBounds))
	m := 0
	for _, p := range c.phases {
		for range p.minutes {
			if m >= i {
				break
			}
			for b, v := range p.perMin {
				out[b] += v
			}
			m++
		}
	}
	for b := 1; b < len(out); b++ {
		out[b] += out[b-1]
	}
	return out
}

func (c sloCase) series(instance string) []inputSeries {
	steps := sloEval/sloStep + 1
	n := node{engine: c.engine, queue: repeat(0, steps), running: repeat(10, steps), kv: repeat(0.3, steps)}
	out := n.series(instance)
	family := map[string]string{"vllm": "vllm:time_to_first_token_seconds", "sglang": "sglang:time_to_first_token_seconds"}[c.engine]
	for b, le := range ttftBounds {
		vs := make([]string, sloEval/sloStep+1)
		for i := range vs {
			vs[i] = fmt.Sprint(c.cumAt(i * sloStep)[b])
		}
		l := "+Inf"
		if !math.IsInf(le, 1) {
			l = fmt.Sprint(le)
		}
		out = append(out, inputSeries{fmt.Sprintf(`%s_bucket{instance=%q, model_name="m", le=%q}`, family, instance, l), strings.Join(vs, " ")})
	}
	return out
}

// input is what a refresh and its on-demand windows report at sloEval:
// the 5m window as Metrics, the others as Windows, each differenced from
// the same counts as the series.
func (c sloCase) input(instance string, t0 time.Time) diagnose.Input {
	now := t0.Add(sloEval * time.Minute)
	var in diagnose.Input
	for _, w := range diagnose.SLOWindows() {
		newest, base := c.cumAt(sloEval), c.cumAt(sloEval-int(w/time.Minute))
		h := &sample.Histogram{Bounds: ttftBounds, Counts: make([]float64, len(ttftBounds))}
		for i := range newest {
			h.Counts[i] = newest[i] - base[i]
		}
		h.Count = h.Counts[len(h.Counts)-1]
		m := &llmdiagv1.NodeMetrics{
			Node: instance, Model: "m", Window: metrics.FormatWindow(w), Up: true,
			ObservedAt: timestamppb.New(now), Staleness: durationpb.New(0),
			Queue: f(0), Running: f(10), KvPressure: f(0.3), QueueRunningRatio: f(0),
			Ttft: metrics.Distribution(h, nil),
		}
		if w == 5*time.Minute {
			in.Metrics = m
		} else {
			in.Windows = append(in.Windows, m)
		}
	}
	return in
}

// per builds a per-minute increment over ttftBounds {0.5, 1, 5, 10, 20, 40, +Inf}.
func per(v ...float64) []float64 { return v }

func sloCases() []sloCase {
	// 100 requests a minute. good: all within 0.5 s. bad20: 20 of them
	// between 5 and 10 s. bad3: 3 of them between 1 and 5 s.
	good := per(100, 0, 0, 0, 0, 0, 0)
	bad20 := per(80, 0, 0, 20, 0, 0, 0)
	bad3 := per(97, 0, 3, 0, 0, 0, 0)
	idle := per(0, 0, 0, 0, 0, 0, 0)
	var out []sloCase
	for _, e := range []string{"vllm", "sglang"} {
		add := func(name string, want llmdiagv1.Status, phases ...phase) {
			out = append(out, sloCase{name: e + "-slo-" + name, engine: e, phases: phases, want: want})
		}
		// 20% over 5 s for the last 2 hours: 20× ≥ 14.4× over 1h and 5m.
		add("burning-2h", statusCrit, phase{250, good}, phase{120, bad20})
		// Burning for the last 20 minutes: the 1h window holds a third of
		// it (6.7×), too little to page; 6h and 30m? 30m is 13.3×, 6h
		// 1.1×: nothing.
		add("burst-20m", statusOK, phase{350, good}, phase{20, bad20})
		// Burned for 2 hours and stopped 10 minutes ago: the fast pair
		// resets (5m is 0×), the slow one holds (6h 6.7×, 30m 13.3×).
		add("recovered-10m", statusWarn, phase{240, good}, phase{120, bad20}, phase{10, good})
		// 3% between 1 and 5 s all along: within a 5 s target (0×); 3× with
		// a 3 s target read at its lower bound, under 6× either way.
		add("slow-leak", statusOK, phase{370, bad3})
		// Nothing for the last hour: no requests, no burn.
		add("idle", statusOK, phase{300, bad20}, phase{70, idle})
	}
	return out
}

// TestSLOAlertsAgreeWithDiagnose: the SLO burn alerts the generated rules
// fire on a node's TTFT buckets (promtool test rules) are exactly those
// diagnose's SLO finding calls for on the same counts: CRIT ↔ critical and
// warning, WARN ↔ warning, OK ↔ none. Run with a target on a bucket bound
// (5 s) and one inside a bucket (3 s, inside (1, 5]), where both read the
// lower attainment bound.
func TestSLOAlertsAgreeWithDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		target  time.Duration
		literal bool // the cases' statuses hold
	}{
		{"target on a bound", 5 * time.Second, true},
		{"target inside a bucket", 3 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := promtool(t)
			dir := t.TempDir()
			th := diagnose.DefaultThresholds()
			th.SLOs = diagnose.NewSLOSet(diagnose.SLO{Name: "ttft", Metric: diagnose.SLOTTFT, Target: tc.target, Objective: 0.99, Period: 30 * 24 * time.Hour})
			cfg := promrules.Config{Thresholds: th, Engines: []llmdiagv1.Engine{llmdiagv1.Engine_ENGINE_VLLM, llmdiagv1.Engine_ENGINE_SGLANG}}
			writeRules(t, dir, cfg)
			t0 := time.Unix(0, 0).UTC()
			group := testGroup{Interval: fmt.Sprintf("%dm", sloStep)}
			seen := map[llmdiagv1.Status]bool{}
			for _, c := range sloCases() {
				group.InputSeries = append(group.InputSeries, c.series(c.name)...)
				d := diagnose.Diagnose(c.input(c.name, t0), th, llmdiagv1.Language_LANGUAGE_EN)
				var got llmdiagv1.Status
				for _, fd := range d.GetFindings() {
					if fd.GetIndicator() == llmdiagv1.Indicator_INDICATOR_SLO_TTFT {
						got = fd.GetStatus()
						if tc.literal && got != c.want {
							t.Errorf("%s: SLO finding %s, the case says %s (%s; %q)", c.name, got, c.want, fd.GetConclusion(), fd.GetEvidence())
						}
					}
				}
				seen[got] = true
				var exp []sampleExp
				for _, s := range severities(0, got) {
					exp = append(exp, sampleExp{fmt.Sprintf(`{llmdiag_slo="ttft", severity=%q}`, s), 1})
				}
				group.ExprTests = append(group.ExprTests, exprTest{
					Expr:       fmt.Sprintf(`count by (llmdiag_slo, severity) (ALERTS{alertstate="firing", instance=%q, llmdiag_slo!=""})`, c.name),
					EvalTime:   fmt.Sprintf("%dm", sloEval),
					ExpSamples: exp,
				})
			}
			if !seen[statusCrit] || !seen[statusWarn] || !seen[statusOK] {
				t.Errorf("the cases cover %v; want CRIT, WARN and OK", seen)
			}
			tf := testFile{RuleFiles: []string{"rules.yaml"}, EvaluationInterval: fmt.Sprintf("%dm", sloStep), Tests: []testGroup{group}}
			b, err := yaml.Marshal(tf)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "test", "rules", "tests.yaml")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("SLO alerts disagree with diagnose (promtool test rules: %v):\n%s", err, out)
			}
		})
	}
}
