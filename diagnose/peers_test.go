package diagnose_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestPeerGroupSameAsPeers: diagnosing every node of a group with the
// group prepared once (Input.Group) gives exactly the diagnosis with the
// group's metrics as Peers, whatever the group holds: equal latencies,
// zeros (−0 too), down, stale and unusable peers, a node id twice, a nil
// entry, another model, a diagnosed node without model or outside the
// group, and any MinPeers.
func TestPeerGroupSameAsPeers(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 2))
	n := 400
	if testing.Short() {
		n = 100
	}
	th := diagnose.DefaultThresholds()
	var fast, compared int
	for i := range n {
		th.MinPeers = r.IntN(4)
		in := randomInput(r)
		if in.Metrics == nil {
			continue
		}
		// The group: the node, its peers and more of both.
		group := append([]*llmdiagv1.NodeMetrics{in.Metrics}, in.Peers...)
		for range r.IntN(12) {
			p := proto.Clone(group[r.IntN(len(group))]).(*llmdiagv1.NodeMetrics)
			p.Node = string(rune('A' + r.IntN(26)))
			switch r.IntN(8) {
			case 0:
				p.Node = in.Metrics.GetNode() // the node's id twice
			case 1:
				setP99(p.GetE2E(), 0)
			case 2:
				setP99(p.GetE2E(), math.Copysign(0, -1))
			case 3:
				setP99(p.GetTtft(), 0.5) // a latency many share
			}
			group = append(group, p)
		}
		switch r.IntN(12) {
		case 0:
			group[len(group)-1].Model = "other" // a mixed group: the general case
		case 1:
			group = append(group, nil)
		}
		g := diagnose.NewPeerGroup(group, th)
		for j, m := range group {
			if m == nil || (j > 0 && r.IntN(3) != 0) {
				continue
			}
			d := in
			d.Metrics = m
			switch r.IntN(10) {
			case 0:
				m = proto.Clone(m).(*llmdiagv1.NodeMetrics)
				m.Model = "" // compared with every peer
				d.Metrics = m
			case 1:
				m = proto.Clone(m).(*llmdiagv1.NodeMetrics)
				m.Model, m.Node = "another", "outsider" // with none
				d.Metrics = m
			}
			d.Peers, d.Group = group, nil
			want := diagnose.Diagnose(d, th, llmdiagv1.Language_LANGUAGE_EN)
			d.Peers, d.Group = nil, g
			got := diagnose.Diagnose(d, th, llmdiagv1.Language_LANGUAGE_EN)
			if !proto.Equal(got, want) {
				t.Fatalf("input %d, node %d (%s): with the group\n%v\nwith the peers\n%v", i, j, m.GetNode(), got, want)
			}
			compared++
			for _, f := range want.GetFindings() {
				if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_PEERS {
					fast++
				}
			}
		}
	}
	// The comparison must have been exercised, not only skipped.
	if compared < n || fast < n/10 {
		t.Errorf("%d diagnoses compared, %d with a peer finding: too few", compared, fast)
	}
}

func setP99(d *llmdiagv1.Distribution, v float64) {
	for _, p := range d.GetPercentiles() {
		if math.Abs(p.GetQuantile()-0.99) < 1e-9 {
			p.Value = v
		}
	}
}
