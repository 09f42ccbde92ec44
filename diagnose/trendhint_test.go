package diagnose_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestTrendHintChangesNothing: a node diagnosed refresh after refresh, each
// time with the hint its last diagnosis left (as the refresh loop does),
// gets the diagnosis it gets without one, in both languages, while its mean
// latency drifts, jumps and goes unknown now and then.
func TestTrendHintChangesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 11))
	th := diagnose.DefaultThresholds()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var history []diagnose.Point
	var hint diagnose.TrendHint
	for step := range 300 {
		at := start.Add(time.Duration(step)*5*time.Second + time.Duration(r.IntN(1000))*time.Microsecond)
		mean := 2 + float64(step)*0.01 + r.Float64()*0.5
		if step%97 == 50 {
			mean *= 4 // a jump
		}
		m := &llmdiagv1.NodeMetrics{
			Node: "a", Model: "m", Engine: llmdiagv1.Engine_ENGINE_VLLM, Window: "5m",
			ObservedAt: timestamppb.New(at), Up: true,
			E2E: dist(mean/2, mean*3), Queue: f64(float64(r.IntN(4))), Running: f64(40), KvPressure: f64(0.3),
		}
		point := diagnose.Point{At: at, Up: true, Queue: m.Queue, Running: m.Running, KVPressure: m.KvPressure}
		if r.IntN(20) != 0 {
			m.E2E.Mean = f64(mean)
			point.E2EMean = m.E2E.Mean
		}
		history = append(history, point)
		if len(history) > 120 {
			history = history[1:]
		}
		for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
			in := diagnose.Input{Metrics: m, History: history}
			without := diagnose.Diagnose(in, th, lang)
			if lang == llmdiagv1.Language_LANGUAGE_EN {
				in.Trend = &hint
			}
			with := diagnose.Diagnose(in, th, lang)
			if !proto.Equal(with, without) {
				t.Fatalf("refresh %d (%v): with the hint\n%v\nwithout\n%v", step, lang, with, without)
			}
		}
	}
	if hint == (diagnose.TrendHint{}) {
		t.Fatal("no diagnosis left a hint: the trend was never fitted")
	}
}
