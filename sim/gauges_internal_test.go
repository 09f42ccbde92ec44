package sim

import (
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
)

// TestFreshCounters checks the cores' incremental counts of requests
// without a first token (Dynamo's queued_requests, Triton's context
// requests) against a recount, through preemptions and queue timeouts,
// under both schedulers.
func TestFreshCounters(t *testing.T) {
	for _, s := range []Scheduler{SchedulerVLLM, SchedulerSGLang} {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			n := Node{ID: "tight", Model: "m", Engine: Dynamo, Scheduler: s,
				Profile: fleet.Profile{DataParallel: 2},
				Perf: Perf{StepBase: 10 * time.Millisecond, StepPerSeq: time.Millisecond,
					PrefillTokensPerSec: 20000, MaxBatchedTokens: 2048, MaxNumSeqs: 16,
					KVCapacityTokens: 16384, BlockSize: 16, MaxModelLen: 8192, ReserveRatio: 0.01},
				Workload: Workload{Rate: 6, Prompt: LogNormal(1000, 0.5), Output: LogNormal(800, 0.6),
					QueueTimeout: 5 * time.Second},
			}
			f, err := New(Config{Seed: 3, Nodes: []Node{n}})
			if err != nil {
				t.Fatal(err)
			}
			for range 60 {
				f.Step(time.Second)
				nd := f.nodes[0]
				for _, c := range nd.cores {
					fresh, prefilling := 0, 0
					for _, r := range c.waiting {
						if r.generated == 0 {
							fresh++
						}
					}
					for _, r := range c.running {
						if r.generated == 0 {
							fresh++
							prefilling++
						}
					}
					if c.fresh != fresh || c.prefilling != prefilling {
						t.Fatalf("at %v core %d: fresh %d prefilling %d, recount %d %d",
							f.Now(), c.idx, c.fresh, c.prefilling, fresh, prefilling)
					}
				}
			}
			st := f.nodes[0].stats
			if st.preemptions == 0 || st.aborted == 0 {
				t.Errorf("preemptions %d, aborted %d: want both, to exercise every path", st.preemptions, st.aborted)
			}
		})
	}
}
