package kubediscovery_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// BenchmarkDiscoveryFollowsChurn measures how fast serve --discovery (role
// inferencepool and role pod, the default --discovery-debounce) follows
// pods that come and go: 20 pods, then per iteration two deleted and two
// created, and the time from the last change until ListNodes lists exactly
// the pods there are. Reported: follow-ms (the median iteration) and
// max-follow-ms. One change after a quiet spell goes at once; changes
// within a debounce of the last wait for it, as Prometheus's do.
//
//	go test -run '^$' -bench DiscoveryFollowsChurn -benchtime 5x ./internal/testing/e2e/kubediscovery
func BenchmarkDiscoveryFollowsChurn(b *testing.B) {
	w := newWorld(b)
	w.createPools()
	var qwen, chat []string // the pods there are, oldest first
	add := func(i int) {
		q, ch := fmt.Sprintf("qwen-%d", i), fmt.Sprintf("chat-%d", i)
		w.addPod("inference", q, poolA)
		w.addPod("batch", ch, labeled)
		qwen, chat = append(qwen, q), append(chat, ch)
	}
	for i := range 10 {
		add(i)
	}
	addr := testkit.FreeAddr(b)
	clitest.Background(b, nil, "serve", "--listen", addr, "--discovery", writeDiscovery(b, w.c.Kubeconfig), "--log-level", "warn")
	c, err := client.New("http://" + addr)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last string
	want := w.want()
	clitest.WaitFor(b, "ListNodes to list the 20 pods", 60*time.Second, func() bool {
		last = mismatch(listNodes(ctx, c), want)
		return last == ""
	}, &last)

	var follows []time.Duration
	b.ResetTimer()
	for i := 10; b.Loop(); i++ {
		w.deletePod("inference", qwen[0])
		w.deletePod("batch", chat[0])
		qwen, chat = qwen[1:], chat[1:]
		add(i)
		changed := time.Now()
		want = w.want()
		clitest.WaitFor(b, "ListNodes to follow the churn", 60*time.Second, func() bool {
			last = mismatch(listNodes(ctx, c), want)
			return last == ""
		}, &last)
		follows = append(follows, time.Since(changed))
	}
	slices.Sort(follows)
	b.ReportMetric(float64(follows[len(follows)/2].Milliseconds()), "follow-ms")
	b.ReportMetric(float64(follows[len(follows)-1].Milliseconds()), "max-follow-ms")
	b.ReportMetric(0, "ns/op")
}
