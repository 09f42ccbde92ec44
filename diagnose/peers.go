package diagnose

import (
	"cmp"
	"math"
	"slices"
	"sort"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// PeerGroup is the nodes serving one model, prepared once for the
// diagnoses of each of them (Input.Group): comparing a node with its peers
// takes the medians of every other node's latency tail and load, which,
// sorted anew for each node, costs a group of n nodes n² log n. A group
// keeps its usable peers' values sorted, and a node's medians are read
// from them less the node's own entries, in O(log n).
//
// A group is a snapshot: the metrics it was made from must not change
// while it is in use. Diagnosing with Group set gives exactly what
// diagnosing with Peers set to the group's metrics gives.
type PeerGroup struct {
	peers []*llmdiagv1.NodeMetrics // as given: the general case
	t     Thresholds
	// fast is set when every peer has the same model (model) and role
	// (role) and every value compares as it reads (no NaN, no −0): the
	// sorted values below are then exact.
	fast  bool
	model string
	role  llmdiagv1.Role
	byInd [len(peerMetrics)]peerValues
}

// peerValues are the usable peers' values of one latency metric: the
// metric's P99 and the peer's load, each sorted, and per node id the
// entries to take out for that node.
type peerValues struct {
	vals, loads []float64
	byNode      map[string][]peerEntry
}

type peerEntry struct{ val, load float64 }

// peerMetrics are the latencies peers are compared on, in the order
// comparePeers reports them.
var peerMetrics = [...]struct {
	ind  llmdiagv1.Indicator
	dist func(*llmdiagv1.NodeMetrics) *llmdiagv1.Distribution
}{
	{llmdiagv1.Indicator_INDICATOR_E2E_P99, (*llmdiagv1.NodeMetrics).GetE2E},
	{llmdiagv1.Indicator_INDICATOR_TTFT_P99, (*llmdiagv1.NodeMetrics).GetTtft},
}

// NewPeerGroup prepares peers, the nodes serving one model (a node's own
// metrics may be among them: a node is never its own peer), for diagnoses
// under thresholds t.
func NewPeerGroup(peers []*llmdiagv1.NodeMetrics, t Thresholds) *PeerGroup {
	g := &PeerGroup{peers: peers, t: t, fast: true}
	first := true
	for _, p := range peers {
		if p == nil {
			continue
		}
		if first {
			g.model, g.role, first = p.GetModel(), roleOf(p), false
		} else if p.GetModel() != g.model || roleOf(p) != g.role {
			g.fast = false
			return g
		}
	}
	for i := range g.byInd {
		g.byInd[i].byNode = map[string][]peerEntry{}
	}
	for _, p := range peers {
		if p == nil || !p.GetUp() || isStale(p, t) {
			continue
		}
		load := Pressure(p.Queue, p.Running, p.KvPressure, t)
		for i, c := range peerMetrics {
			q := percentile(c.dist(p), 0.99)
			if q == nil {
				continue
			}
			v := q.GetValue()
			if !exact(v) || !exact(load) {
				g.fast = false
				return g
			}
			pv := &g.byInd[i]
			pv.vals = append(pv.vals, v)
			pv.loads = append(pv.loads, load)
			pv.byNode[p.GetNode()] = append(pv.byNode[p.GetNode()], peerEntry{v, load})
		}
	}
	for i := range g.byInd {
		slices.Sort(g.byInd[i].vals)
		slices.Sort(g.byInd[i].loads)
	}
	return g
}

// exact reports whether v sorts and compares as its value alone: equal
// values are then the same float64, so which of them a median picks does
// not matter.
func exact(v float64) bool { return !math.IsNaN(v) && !(v == 0 && math.Signbit(v)) }

// compare is comparePeers(m, the group's peers, t).
func (g *PeerGroup) compare(m *llmdiagv1.NodeMetrics, t Thresholds) (peerComparison, []peerComparison) {
	if !g.fast || t != g.t || (m.GetModel() != "" && g.model != "" && m.GetModel() != g.model) || roleOf(m) != g.role {
		return comparePeers(m, g.peers, t)
	}
	for _, c := range peerMetrics {
		if own := percentile(c.dist(m), 0.99); own != nil && !exact(own.GetValue()) {
			return comparePeers(m, g.peers, t)
		}
	}
	ownLoad := Pressure(m.Queue, m.Running, m.KvPressure, t)
	var best peerComparison
	var all []peerComparison
	for i, c := range peerMetrics {
		own := percentile(c.dist(m), 0.99)
		if own == nil {
			continue
		}
		pv := &g.byInd[i]
		mine := pv.byNode[m.GetNode()]
		n := len(pv.vals) - len(mine)
		if n < t.MinPeers || n == 0 {
			continue
		}
		outVals := make([]float64, len(mine))
		outLoads := make([]float64, len(mine))
		for j, e := range mine {
			outVals[j], outLoads[j] = e.val, e.load
		}
		vals := newSortedLess(pv.vals, outVals)
		med := vals.median(nil)
		if med <= 0 {
			continue
		}
		ownV := own.GetValue()
		pc := peerComparison{
			peers: n, metric: c.ind,
			own: ownV, median: med, ratio: ownV / med,
			ownLoad: ownLoad, peerLoad: newSortedLess(pv.loads, outLoads).median(nil),
			groupMedian: vals.median(&ownV), groupN: n + 1,
		}
		all, best = addComparison(all, best, pc, t)
	}
	return best, all
}

// sortedLess is a sorted slice less some of its elements (by position).
type sortedLess struct {
	s   []float64
	out []int // positions taken out, ascending
}

// newSortedLess is s, sorted, less one element equal to each of out's
// values, which s must hold.
func newSortedLess(s []float64, out []float64) sortedLess {
	v := sortedLess{s: s}
	for _, x := range out {
		i, _ := slices.BinarySearch(s, x)
		for slices.Contains(v.out, i) {
			i++ // an equal value taken out already
		}
		v.out = append(v.out, i)
	}
	slices.Sort(v.out)
	return v
}

func (v sortedLess) len() int { return len(v.s) - len(v.out) }

// at is the element at position i of what is left.
func (v sortedLess) at(i int) float64 {
	for _, o := range v.out {
		if o <= i {
			i++
		}
	}
	return v.s[i]
}

// less is how many elements of what is left are below x.
func (v sortedLess) less(x float64) int {
	n := sort.Search(len(v.s), func(i int) bool { return cmp.Compare(v.s[i], x) >= 0 })
	for _, o := range v.out {
		if o < n {
			n--
		}
	}
	return n
}

// median is median() of what is left, with add when not nil.
func (v sortedLess) median(add *float64) float64 {
	n := v.len()
	get := v.at
	if add != nil {
		n++
		p := v.less(*add)
		get = func(i int) float64 {
			switch {
			case i < p:
				return v.at(i)
			case i == p:
				return *add
			}
			return v.at(i - 1)
		}
	}
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return get(n / 2)
	}
	return (get(n/2-1) + get(n/2)) / 2
}
