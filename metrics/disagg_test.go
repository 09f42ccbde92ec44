package metrics

import (
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
)

func TestComputeDisagg(t *testing.T) {
	t0 := time.Date(2026, 1, 13, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration, kv sample.KVTransfer) *sample.Sample {
		return &sample.Sample{At: t0.Add(d), Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM,
			Role: llmdiagv1.Role_ROLE_DECODE, RoleSource: "x", KVTransfer: kv}
	}
	tests := []struct {
		name                           string
		base, newest                   *sample.Sample
		perSecond, mean, bytes, failed *float64
	}{
		{
			// 60 transfers in 60 s taking 30 s in all: 0.5 s each.
			name:      "window",
			base:      at(0, sample.KVTransfer{Count: f(100), Seconds: f(10), Bytes: f(1e9), Failures: f(1)}),
			newest:    at(time.Minute, sample.KVTransfer{Count: f(160), Seconds: f(40), Bytes: f(7e9), Failures: f(4)}),
			perSecond: f(1), mean: f(0.5), bytes: f(1e8), failed: f(0.05),
		},
		{
			// No transfer in the window: a rate of 0, no mean.
			name:      "idle",
			base:      at(0, sample.KVTransfer{Count: f(100), Seconds: f(10)}),
			newest:    at(time.Minute, sample.KVTransfer{Count: f(100), Seconds: f(10)}),
			perSecond: f(0),
		},
		{
			name:   "not exposed",
			base:   at(0, sample.KVTransfer{}),
			newest: at(time.Minute, sample.KVTransfer{}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nm := Compute(tc.newest, tc.base, "1m", nil, tc.newest.At, time.Hour)
			if nm.GetRole() != llmdiagv1.Role_ROLE_DECODE || nm.GetRoleSource() != "x" {
				t.Errorf("role %v from %q", nm.GetRole(), nm.GetRoleSource())
			}
			fig := testkit.FiguresAbs(t, 1e-9)
			fig("transfers/s", nm.KvTransfersPerSecond, tc.perSecond)
			fig("mean", nm.KvTransferSecondsMean, tc.mean)
			fig("bytes/s", nm.KvTransferBytesPerSecond, tc.bytes)
			fig("failures/s", nm.KvTransferFailuresPerSecond, tc.failed)
		})
	}
}
