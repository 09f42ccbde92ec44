package diagnose_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

const (
	rolePrefill = llmdiagv1.Role_ROLE_PREFILL
	roleDecode  = llmdiagv1.Role_ROLE_DECODE
	roleBoth    = llmdiagv1.Role_ROLE_BOTH
)

// prefillWorkerMetrics is the prefill worker of a 1P1D deployment under
// long prompts (vllm#22454): 9,000-token prompts at 2 requests/s, one
// token each, TTFT P99 14 s with little queueing.
func prefillWorkerMetrics() *llmdiagv1.NodeMetrics {
	m := healthyMetrics()
	m.Node, m.Role, m.RoleSource = "pd-prefill-0", rolePrefill, "fleet file"
	m.Ttft, m.E2E = dist(4, 14), dist(4.2, 14.5)
	m.Ttft.Mean = f64(5)
	m.Queue, m.Running, m.KvPressure = f64(1), f64(4), f64(0.35)
	m.PromptTokensPerSecond, m.GenerationTokensPerSecond, m.RequestsPerSecond = f64(18000), f64(2), f64(2)
	m.KvTransfersPerSecond, m.KvTransferSecondsMean, m.KvTransferFailuresPerSecond = f64(2), f64(0.12), f64(0)
	return m
}

// decodeWorkerMetrics is its decode worker: each first token waits for the
// KV cache, 1.2 s per transfer on average over a slow path.
func decodeWorkerMetrics() *llmdiagv1.NodeMetrics {
	m := healthyMetrics()
	m.Node, m.Role, m.RoleSource = "pd-decode-0", roleDecode, `engine_type="decode"`
	m.Ttft, m.E2E = dist(3, 12), dist(30, 55)
	m.Ttft.Mean = f64(3.5)
	m.Queue, m.Running, m.KvPressure = f64(0), f64(40), f64(0.5)
	m.PromptTokensPerSecond, m.GenerationTokensPerSecond, m.RequestsPerSecond = f64(18000), f64(800), f64(2)
	m.KvTransfersPerSecond, m.KvTransferSecondsMean = f64(2), f64(1.2)
	m.KvTransferBytesPerSecond, m.KvTransferFailuresPerSecond = f64(2e9), f64(0)
	return m
}

// slowDecodeMetrics is a node whose decode is slow and whose E2E tail is
// long, with light prompts: DECODE_BOUND unless it is a prefill worker.
func slowDecodeMetrics() *llmdiagv1.NodeMetrics {
	m := healthyMetrics()
	m.E2E = dist(40, 90)
	m.Running, m.GenerationTokensPerSecond = f64(50), f64(200)
	return m
}

func TestRoleAwareVerdicts(t *testing.T) {
	tests := []struct {
		name      string
		metrics   func() *llmdiagv1.NodeMetrics
		role      llmdiagv1.Role
		cause     llmdiagv1.Cause
		status    llmdiagv1.Status
		notCause  llmdiagv1.Cause // never this
		summary   string          // in the summary, when set
		rec       string          // in a recommendation, when set
		ruledOut  string          // starts a ruled-out line, when set
		findings  map[llmdiagv1.Indicator]llmdiagv1.Status
		noFinding []llmdiagv1.Indicator
	}{
		{
			name: "slow decode, both: decode-bound", metrics: slowDecodeMetrics, role: roleBoth,
			cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, status: warn,
			noFinding: []llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_ROLE},
		},
		{
			name: "slow decode, prefill worker: not judged on decode", metrics: slowDecodeMetrics, role: rolePrefill,
			cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: warn, notCause: llmdiagv1.Cause_CAUSE_DECODE_BOUND,
			ruledOut: "not decode: this is a prefill worker",
			findings: map[llmdiagv1.Indicator]llmdiagv1.Status{
				llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE: ok,
				llmdiagv1.Indicator_INDICATOR_DECODE_SPEED:          ok,
				llmdiagv1.Indicator_INDICATOR_ROLE:                  ok,
				llmdiagv1.Indicator_INDICATOR_E2E_P99:               warn,
			},
		},
		{
			name: "prefill worker under long prompts: prefill-bound", metrics: prefillWorkerMetrics, role: rolePrefill,
			cause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND, status: warn,
			findings: map[llmdiagv1.Indicator]llmdiagv1.Status{
				llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE: ok,
				llmdiagv1.Indicator_INDICATOR_DECODE_SPEED:          ok,
				llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME:      ok,
				llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_FAILURES:  ok,
			},
			noFinding: []llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_VOLUME},
		},
		{
			name: "high TTFT, heavy prompts, both: prefill-bound", metrics: decodeWorkerMetrics, role: roleBoth,
			cause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND,
		},
		{
			name: "decode worker waiting for slow transfers", metrics: decodeWorkerMetrics, role: roleDecode,
			cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: warn, notCause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND,
			summary: "waits for slow KV transfers (1.2 s each", rec: "KV-transfer path", ruledOut: "not prefill: TTFT P99 12 s is high, but this is a decode worker",
			findings: map[llmdiagv1.Indicator]llmdiagv1.Status{
				llmdiagv1.Indicator_INDICATOR_TTFT_P99:              warn,
				llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME:      warn,
				llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_VOLUME:    ok,
				llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_FAILURES:  ok,
				llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE:     ok,
				llmdiagv1.Indicator_INDICATOR_ROLE:                  ok,
				llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE: ok,
			},
		},
		{
			name: "decode worker, transfers fast, TTFT high: look at prefill", role: roleDecode,
			metrics: func() *llmdiagv1.NodeMetrics {
				m := decodeWorkerMetrics()
				m.KvTransferSecondsMean = f64(0.05)
				return m
			},
			cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: warn, notCause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND,
			summary: "includes the prefill worker's queue and prefill", rec: "Look at the prefill workers",
			findings: map[llmdiagv1.Indicator]llmdiagv1.Status{llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME: ok},
		},
		{
			name: "transfers failing: CRIT", role: roleDecode,
			metrics: func() *llmdiagv1.NodeMetrics {
				m := healthyMetrics()
				m.Role, m.KvTransfersPerSecond, m.KvTransferFailuresPerSecond = roleDecode, f64(1.9), f64(0.1)
				return m
			},
			status: crit, rec: "transfer errors",
			findings: map[llmdiagv1.Indicator]llmdiagv1.Status{llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_FAILURES: crit},
			// No transfer time exposed, none in the window's count: no time row.
			noFinding: []llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_VOLUME},
		},
		{
			name: "nothing exposed: no KV rows", metrics: healthyMetrics, role: roleBoth,
			cause: llmdiagv1.Cause_CAUSE_HEALTHY, status: ok,
			noFinding: []llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_ROLE, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME,
				llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_VOLUME, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_FAILURES},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.metrics()
			m.Role = tc.role
			d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
			if tc.cause != 0 && d.GetRootCause() != tc.cause {
				t.Errorf("cause %v, want %v: %s", d.GetRootCause(), tc.cause, d.GetSummary())
			}
			if tc.notCause != 0 && d.GetRootCause() == tc.notCause {
				t.Errorf("cause %v", d.GetRootCause())
			}
			if tc.status != 0 && d.GetStatus() != tc.status {
				t.Errorf("status %v, want %v", d.GetStatus(), tc.status)
			}
			if d.GetRole() != tc.role {
				t.Errorf("role %v, want %v", d.GetRole(), tc.role)
			}
			if tc.summary != "" && !strings.Contains(d.GetSummary(), tc.summary) {
				t.Errorf("summary lacks %q: %s", tc.summary, d.GetSummary())
			}
			if tc.rec != "" && !slices.ContainsFunc(d.GetRecommendations(), func(r string) bool { return strings.Contains(r, tc.rec) }) {
				t.Errorf("recommendations lack %q: %q", tc.rec, d.GetRecommendations())
			}
			if tc.ruledOut != "" && !slices.ContainsFunc(d.GetRuledOut(), func(r string) bool { return strings.HasPrefix(r, tc.ruledOut) }) {
				t.Errorf("ruled out lacks %q: %q", tc.ruledOut, d.GetRuledOut())
			}
			for ind, want := range tc.findings {
				x := findingOf(d, ind)
				if x == nil || x.GetStatus() != want {
					t.Errorf("finding %v = %v, want %v", ind, x, want)
				}
			}
			for _, ind := range tc.noFinding {
				if x := findingOf(d, ind); x != nil {
					t.Errorf("unexpected finding %v", x)
				}
			}
			if tc.role == rolePrefill {
				for _, ind := range []llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_INTER_TOKEN} {
					if x := findingOf(d, ind); x != nil && (x.GetStatus() == warn || x.GetStatus() == crit) {
						t.Errorf("prefill worker judged on %v: %v", ind, x)
					}
				}
			}
		})
	}
}

// Peers are the nodes of the node's role: a decode worker is not an outlier
// against prefill workers of the same model, with or without a PeerGroup.
func TestPeersOfTheSameRole(t *testing.T) {
	m := healthyMetrics()
	m.Role, m.E2E = roleDecode, dist(8, 80)
	var peers []*llmdiagv1.NodeMetrics
	for _, id := range []string{"p1", "p2", "p3"} {
		p := peer(id, 20)
		p.Role = rolePrefill
		peers = append(peers, p)
	}
	th := diagnose.DefaultThresholds()
	for _, in := range []diagnose.Input{
		{Metrics: m, History: flatHistory(10, 0, 10), Peers: peers},
		{Metrics: m, History: flatHistory(10, 0, 10), Group: diagnose.NewPeerGroup(append(peers, m), th)},
	} {
		d := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN)
		if d.GetRootCause() == llmdiagv1.Cause_CAUSE_NODE_OUTLIER || findingOf(d, llmdiagv1.Indicator_INDICATOR_PEERS) != nil {
			t.Errorf("compared with other roles: %v %q", d.GetRootCause(), d.GetSummary())
		}
	}
	// The same peers as decode workers do make it an outlier.
	for _, p := range peers {
		p.Role = roleDecode
	}
	d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10), Peers: peers}, th, llmdiagv1.Language_LANGUAGE_EN)
	if findingOf(d, llmdiagv1.Indicator_INDICATOR_PEERS) == nil {
		t.Errorf("no peer comparison among decode workers: %v", d.GetRootCause())
	}
}

// TestRoleGolden: the prefill and the decode worker of a 1P1D deployment,
// in English and Chinese (regenerate with go test ./diagnose -update).
func TestRoleGolden(t *testing.T) {
	for _, tc := range []struct {
		file    string
		metrics func() *llmdiagv1.NodeMetrics
		lang    llmdiagv1.Language
		want    []string
	}{
		{"prefill-worker.en.json", prefillWorkerMetrics, llmdiagv1.Language_LANGUAGE_EN, []string{"prefill worker", "not judged", "role from"}},
		{"prefill-worker.zh.json", prefillWorkerMetrics, llmdiagv1.Language_LANGUAGE_ZH, []string{"Prefill 节点", "不评判", "角色来自"}},
		{"decode-worker.en.json", decodeWorkerMetrics, llmdiagv1.Language_LANGUAGE_EN, []string{"decode worker", "KV transfer time", "2 GB/s", "1 GB per transfer"}},
		{"decode-worker.zh.json", decodeWorkerMetrics, llmdiagv1.Language_LANGUAGE_ZH, []string{"Decode 节点", "KV 传输耗时", "不是 Prefill 瓶颈"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			d := diagnose.Diagnose(diagnose.Input{Metrics: tc.metrics(), History: flatHistory(10, 0, 10)}, diagnose.DefaultThresholds(), tc.lang)
			got := stableJSON(t, d)
			for _, w := range tc.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("lacks %q", w)
				}
			}
			testkit.Golden(t, filepath.Join("testdata", tc.file), got)
		})
	}
}

// roleClaimVariants are the claim checks' variants of role.go: the
// prefill and the decode worker, with slow and with fast transfers.
func roleClaimVariants() []claimVariant {
	in := func(m func() *llmdiagv1.NodeMetrics, edit func(*llmdiagv1.NodeMetrics)) func() diagnose.Input {
		return func() diagnose.Input {
			x := m()
			edit(x)
			return diagnose.Input{Metrics: x, History: flatHistory(10, 0, 10)}
		}
	}
	return []claimVariant{
		{"prefill worker", in(prefillWorkerMetrics, func(*llmdiagv1.NodeMetrics) {})},
		{"prefill worker, slow decode", in(slowDecodeMetrics, func(m *llmdiagv1.NodeMetrics) { m.Role = rolePrefill })},
		{"decode worker, slow transfers", in(decodeWorkerMetrics, func(*llmdiagv1.NodeMetrics) {})},
		{"decode worker, fast transfers", in(decodeWorkerMetrics, func(m *llmdiagv1.NodeMetrics) { m.KvTransferSecondsMean = f64(0.05) })},
		{"decode worker, transfers untimed", in(decodeWorkerMetrics, func(m *llmdiagv1.NodeMetrics) { m.KvTransferSecondsMean = nil })},
	}
}
