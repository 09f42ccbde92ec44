package closedloop

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// WriteTables prints the repetition: the setting, then one table per
// arm, a row per phase.
func (r *Report) WriteTables(w io.Writer) error {
	fmt.Fprintf(w, "%d nodes per arm, one node's capacity %.2f requests/s (%d-token prompts, %d-token answers, %d batch slots), offered %.1f requests/s to each arm (%.0f%%)\n",
		Nodes, r.Capacity, PromptTokens, OutputTokens, MaxNumSeqs, r.Rate, 100*r.Rate/(r.Capacity*Nodes))
	fmt.Fprintf(w, "HAProxy balance %s in arm A, %s in arm B; phases: %s %v, then %s, %s (%s at 1/%g of its speed), %s (%s hung), %v each\n",
		r.Arms[0].Balance, r.Arms[1].Balance, PhaseWarmup, r.Warmup, PhaseBaseline, PhaseSlowed, SlowNode, r.Factor, PhaseStalled, SlowNode, r.Phase)
	fmt.Fprintln(w, "requests counted in the phase they were sent in; \"all\": over every request sent, a failed one counted for what it waited (a timeout: 45 s)")
	for _, a := range r.Arms {
		fmt.Fprintf(w, "\n%s\n", a.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "phase\tsent\tok\tfailed\ttimed out\tTTFT p50\tTTFT p99\tTTFT p99 all\tE2E p50\tE2E p99\tE2E p99 all\t"+SlowNode+" share\t")
		for _, p := range a.Phases {
			c := p.Client
			if c == nil {
				fmt.Fprintf(tw, "%s\t(no result)\t\n", p.Name)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t\n", p.Name, c.Sent, c.Succeeded, p.Failed(), p.Timeouts(),
				secs(c.TTFT.P50, c.TTFT.N), secs(c.TTFT.P99, c.TTFT.N), secs(c.TTFTAll.P99, c.TTFTAll.N),
				secs(c.E2E.P50, c.E2E.N), secs(c.E2E.P99, c.E2E.N), secs(c.E2EAll.P99, c.E2EAll.N), 100*Share(p.Received, SlowNode))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if a.Agent {
			fmt.Fprintf(w, "agent flagged %s %s into the slowed phase (%q), %s into the stalled phase (%q)\n",
				SlowNode, dur(a.SlowFlagged), a.SlowReply, dur(a.StallFlagged), a.StallReply)
		}
		if len(a.Trace) > 0 {
			fmt.Fprintf(w, "agent's replies for %s from the slowed phase on:", SlowNode)
			for _, e := range a.Trace {
				fmt.Fprintf(w, " %s %q;", dur(e.At), e.Reply)
			}
			fmt.Fprintln(w)
		}
		if a.AfterSlowFlag != nil {
			fmt.Fprintf(w, "after B's slowed-phase flag + %v: %s got %.1f%% of new requests %v\n", AgentInter+FlagAllowance, SlowNode, 100*Share(a.AfterSlowFlag, SlowNode), a.AfterSlowFlag)
		}
		if a.AfterStallFlag != nil {
			fmt.Fprintf(w, "after B's STALLED + %v: %s got %d new requests %v\n", AgentInter+FlagAllowance, SlowNode, a.AfterStallFlag[SlowNode], a.AfterStallFlag)
		}
	}
	return nil
}

func secs(s float64, n int) string {
	if n == 0 {
		return "-"
	}
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.2fs", s)
}

func dur(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(10 * time.Millisecond).String()
}

// Ratios are the acceptance figures of a repetition: arm A's over arm B's.
type Ratios struct {
	// SlowE2EP99: the slowed phase's E2E p99 over every request sent (one
	// that failed counted for what it waited), so that requests a slow
	// node held until the client gave up weigh in the tail instead of
	// dropping out of it.
	SlowE2EP99 float64
	// StallTTFTP99: the stalled phase's TTFT p99 over every request sent
	// (one that never got a first token counted for what it waited).
	StallTTFTP99 float64
	// StallFailures: the stalled phase's failed and timed-out requests;
	// +Inf when arm B had none (then StallFailuresA is arm A's count).
	StallFailures  float64
	StallFailuresA int
	StallFailuresB int
}

// Ratios computes the repetition's Ratios.
func (r *Report) Ratios() Ratios {
	a, b := r.Arms[0], r.Arms[1]
	as, bs := a.Phase(PhaseSlowed).Client, b.Phase(PhaseSlowed).Client
	at, bt := a.Phase(PhaseStalled).Client, b.Phase(PhaseStalled).Client
	q := Ratios{
		SlowE2EP99:     as.E2EAll.P99 / bs.E2EAll.P99,
		StallTTFTP99:   at.TTFTAll.P99 / bt.TTFTAll.P99,
		StallFailuresA: at.Failed(),
		StallFailuresB: bt.Failed(),
	}
	q.StallFailures = math.Inf(1)
	if q.StallFailuresB > 0 {
		q.StallFailures = float64(q.StallFailuresA) / float64(q.StallFailuresB)
	}
	return q
}

// Median is the median of each ratio over reps (the lower middle one for
// an even count).
func Median(reps []Ratios) Ratios {
	med := func(f func(Ratios) float64) float64 {
		var v []float64
		for _, r := range reps {
			v = append(v, f(r))
		}
		slices.Sort(v)
		return v[(len(v)-1)/2]
	}
	return Ratios{
		SlowE2EP99:     med(func(r Ratios) float64 { return r.SlowE2EP99 }),
		StallTTFTP99:   med(func(r Ratios) float64 { return r.StallTTFTP99 }),
		StallFailures:  med(func(r Ratios) float64 { return r.StallFailures }),
		StallFailuresA: int(med(func(r Ratios) float64 { return float64(r.StallFailuresA) })),
		StallFailuresB: int(med(func(r Ratios) float64 { return float64(r.StallFailuresB) })),
	}
}

// String prints the ratios against their targets.
func (q Ratios) String() string {
	fail := fmt.Sprintf("%.1f× (%d ÷ %d)", q.StallFailures, q.StallFailuresA, q.StallFailuresB)
	if math.IsInf(q.StallFailures, 1) {
		fail = fmt.Sprintf("%d alone, 0 with the agent (no ratio)", q.StallFailuresA)
	}
	return fmt.Sprintf("slowed E2E p99 (all sent) alone ÷ agent %.1f× (target ≥2×); stalled TTFT p99 (all sent) alone ÷ agent %.1f× (target ≥3×); stalled failed+timed out alone ÷ agent %s (target ≥10×)",
		q.SlowE2EP99, q.StallTTFTP99, fail)
}
