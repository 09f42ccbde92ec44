package metrics

import (
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// setDisagg fills the role newest detected and the KV-transfer rates of the
// window: transfers, bytes and failures per second, and the mean time of
// one transfer (Δseconds ÷ Δtransfers), absent when no transfer completed
// in the window or when the engine exposes no such counter.
func setDisagg(nm *llmdiagv1.NodeMetrics, newest *sample.Sample, r rater) {
	nm.Role, nm.RoleSource = newest.Role, newest.RoleSource
	count := func(s *sample.Sample) *float64 { return s.KVTransfer.Count }
	secs := func(s *sample.Sample) *float64 { return s.KVTransfer.Seconds }
	nm.KvTransfersPerSecond = r.rate(count)
	nm.KvTransferBytesPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.KVTransfer.Bytes })
	nm.KvTransferFailuresPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.KVTransfer.Failures })
	n, t := r.rate(count), r.rate(secs)
	if n != nil && t != nil && *n > 0 {
		nm.KvTransferSecondsMean = sample.F(*t / *n)
	}
}
