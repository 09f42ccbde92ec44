package readygate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
)

// Condition is the gate condition llmdiag keeps on a pod, without its
// type and times.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Same reports whether c and d say the same (status, reason and message).
func (c Condition) Same(d Condition) bool { return c == d }

// Reasons of the conditions that do not come from a cause.
const (
	ReasonRoutable = "Routable"
	// ReasonNoFreshData: the nodes' data is stale or UNKNOWN (fail open).
	ReasonNoFreshData = "NoFreshData"
	// ReasonNoVerdict: no verdict within the grace after the pod appeared.
	ReasonNoVerdict = "NoVerdict"
	// ReasonSpared: not routable, but held ready by the unready fraction.
	ReasonSpared = "Spared"
	// ReasonStopped: llmdiag stopped and failed open.
	ReasonStopped = "LlmdiagStopped"
	// ReasonSaturated: not routable by the fast lane's reading of queue
	// and KV cache while the last verdict's cause says nothing more.
	ReasonSaturated = "Saturated"
)

// maxMessage bounds a condition's message (Kubernetes takes 32 KiB; a
// line for `kubectl describe pod` needs far less).
const maxMessage = 1024

// acronyms are the words of a cause's name a reason spells in capitals,
// or as the product does.
var acronyms = map[string]string{"KV": "KV", "GPU": "GPU", "LORA": "LoRA", "SLO": "SLO", "TTFT": "TTFT", "TPOT": "TPOT"}

// Reason is a cause's name as a Kubernetes condition reason (CamelCase,
// letters and digits): CAUSE_KV_EXHAUSTED → KVExhausted, CAUSE_OVERLOADED →
// Overloaded, CAUSE_LORA_CONTENTION → LoRAContention, and so for any cause
// added later; CAUSE_UNSPECIFIED (or an unknown value) → NotRoutable.
func Reason(c llmdiagv1.Cause) string {
	name, ok := llmdiagv1.Cause_name[int32(c)]
	if !ok || c == llmdiagv1.Cause_CAUSE_UNSPECIFIED {
		return "NotRoutable"
	}
	return CamelCase(strings.TrimPrefix(name, "CAUSE_"))
}

// CamelCase turns an upper-case, underscore-separated name
// (QUEUE_SATURATED) into a Kubernetes reason (QueueSaturated).
func CamelCase(name string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(name, "_") {
		if w == "" {
			continue
		}
		if a, ok := acronyms[w]; ok {
			b.WriteString(a)
			continue
		}
		for i, r := range w {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				continue
			}
			if i == 0 {
				b.WriteRune(unicode.ToUpper(r))
			} else {
				b.WriteRune(unicode.ToLower(r))
			}
		}
	}
	return b.String()
}

// Node is what the plan reads of one of a pod's nodes: its latest record.
type Node struct {
	ID     string
	Record *store.Record
}

// Pod is one pod that declares the gate, as the plan reads it.
type Pod struct {
	// Key is namespace/name.
	Key string
	// Appeared is when the pod was created.
	Appeared time.Time
	// Current is the gate condition the pod holds, nil when absent.
	Current *Condition
	// Nodes are the discovered nodes the pod carries (its ranks or ports),
	// with their records; none when discovery has not found it.
	Nodes []Node
}

// Rules are the plan's rules.
type Rules struct {
	// StaleAfter is the service's staleness rule (serve --stale-after).
	StaleAfter time.Duration
	// Grace is how long a pod without a verdict waits before it is set
	// True anyway (serve --readiness-gate-grace).
	Grace time.Duration
	// MaxUnreadyFraction bounds the fraction of a group's gated pods held
	// False at once (serve --max-unready-fraction).
	MaxUnreadyFraction float64
}

// Desired is the condition the plan wants on a pod.
type Desired struct {
	Key string
	// Cond is the condition to hold; nil leaves an absent condition absent
	// (a new pod waiting for its first verdict within the grace).
	Cond *Condition
	// Group is the pool (or else the model) the pod counts in for the
	// unready fraction; "" when it has no node.
	Group string
	// Load is the pod's load score: its nodes' highest.
	Load float64
	// Spared is set when the pod is not routable but held True by the
	// unready fraction.
	Spared bool
	// Unready is the condition the verdicts alone would give a spared pod.
	Unready *Condition
	// Waiting is set by Admit on a pod to turn False once others of its
	// group are True: Cond is its current condition meanwhile.
	Waiting bool
}

// Plan is the condition each pod should hold at now, in the order of
// pods:
//
//   - every node of the pod routable ⇒ True (Routable);
//   - any node not routable ⇒ False, reason the cause (Reason) of the
//     first such node, message its one-line verdict;
//   - otherwise (stale or UNKNOWN data on some node, none not routable)
//     ⇒ True (NoFreshData): fail open;
//   - no node or no verdict: absent while the pod is younger than
//     Rules.Grace (a condition it already holds is kept), then True
//     (NoVerdict);
//   - then, per group (the nodes' pool label, else their model), at most
//     floor(MaxUnreadyFraction × the group's pods) pods stay False: the
//     most loaded; the others are spared, True (Spared) with the reason and
//     verdict in the message.
func Plan(pods []Pod, now time.Time, o Rules) []Desired {
	out := make([]Desired, len(pods))
	for i, p := range pods {
		out[i] = desire(p, now, o)
	}
	spare(pods, out, o.MaxUnreadyFraction)
	return out
}

// desire is one pod's condition from its verdicts alone.
func desire(p Pod, now time.Time, o Rules) Desired {
	d := Desired{Key: p.Key, Load: math.Inf(-1)}
	var unknown, routable int
	var blocked *Node
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if n.Record == nil || n.Record.Node == nil {
			continue
		}
		if d.Group == "" {
			d.Group = group(n.Record.Node)
		}
		if s := n.Record.Node.GetLoadScore(); !math.IsNaN(s) && s > d.Load {
			d.Load = s
		}
		switch r, _ := store.Decide(n.Record, now, o.StaleAfter); r {
		case store.Routable:
			routable++
		case store.NotRoutable:
			if blocked == nil {
				blocked = n
			}
		default:
			unknown++
		}
	}
	if math.IsInf(d.Load, -1) {
		d.Load = 0
	}
	switch {
	case blocked != nil:
		d.Cond = notRoutable(blocked, len(p.Nodes))
	case routable > 0 && routable == len(p.Nodes):
		d.Cond = &Condition{Status: corev1.ConditionTrue, Reason: ReasonRoutable, Message: "llmdiag: routable"}
	case unknown > 0:
		d.Cond = &Condition{Status: corev1.ConditionTrue, Reason: ReasonNoFreshData, Message: "llmdiag: no fresh data on this pod's nodes (fail open)"}
	case now.Sub(p.Appeared) < o.Grace:
		// A node without a record yet, or none discovered: wait, keeping
		// what the pod holds.
		d.Cond = p.Current
	default:
		d.Cond = &Condition{Status: corev1.ConditionTrue, Reason: ReasonNoVerdict,
			Message: fmt.Sprintf("llmdiag: no verdict on this pod within %s of its creation (fail open)", o.Grace)}
	}
	return d
}

// group is the group a node counts in for the unready fraction: its pool
// (label pool or inferencepool), else its model.
func group(n *llmdiagv1.Node) string {
	for _, l := range []string{"pool", "inferencepool"} {
		if v := n.GetLabels()[l]; v != "" {
			ns := n.GetLabels()["namespace"]
			return "pool " + ns + "/" + v
		}
	}
	return "model " + n.GetModel()
}

// notRoutable is the False condition of a pod whose node n is not
// routable.
func notRoutable(n *Node, nodes int) *Condition {
	rn := n.Record.Node
	reason := Reason(rn.GetRootCause())
	summary := n.Record.Diagnosis.GetSummary()
	switch rn.GetRootCause() {
	case llmdiagv1.Cause_CAUSE_HEALTHY, llmdiagv1.Cause_CAUSE_UNSPECIFIED, llmdiagv1.Cause_CAUSE_BURST:
		// The fast lane read the node saturated since its last verdict.
		reason = ReasonSaturated
		summary = fmt.Sprintf("saturated (queue %s, KV cache %s), read by the fast lane since the last verdict",
			num(n.Record.Metrics.Queue, "%.0f", 1), num(n.Record.Metrics.KvPressure, "%.0f%%", 100))
	}
	if summary == "" {
		summary = rn.GetStatus().String() + " " + rn.GetRootCause().String()
	}
	msg := "llmdiag: " + summary
	if nodes > 1 {
		msg = "llmdiag: node " + n.ID + ": " + summary
	}
	return &Condition{Status: corev1.ConditionFalse, Reason: reason, Message: clip(msg)}
}

func num(v *float64, format string, scale float64) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprintf(format, *v*scale)
}

// clip bounds a message to maxMessage bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// spare holds at most floor(fraction × group size) pods of each group
// False: the most loaded stay False, the others are set True (Spared).
func spare(pods []Pod, out []Desired, fraction float64) {
	groups := map[string][]int{}
	for i := range out {
		if out[i].Group != "" {
			groups[out[i].Group] = append(groups[out[i].Group], i)
		}
	}
	for g, idx := range groups {
		var unready []int
		for _, i := range idx {
			if c := out[i].Cond; c != nil && c.Status == corev1.ConditionFalse {
				unready = append(unready, i)
			}
		}
		allowed := allowedUnready(len(idx), fraction)
		if len(unready) <= allowed {
			continue
		}
		// Most loaded first; then those already False (no flapping on a
		// tie); then by key.
		slices.SortFunc(unready, func(a, b int) int {
			if c := cmp.Compare(out[b].Load, out[a].Load); c != 0 {
				return c
			}
			if c := cmp.Compare(held(pods[b]), held(pods[a])); c != 0 {
				return c
			}
			return cmp.Compare(out[a].Key, out[b].Key)
		})
		for _, i := range unready[allowed:] {
			d := &out[i]
			d.Spared, d.Unready = true, d.Cond
			d.Cond = &Condition{Status: corev1.ConditionTrue, Reason: ReasonSpared, Message: clip(fmt.Sprintf(
				"llmdiag: spared: at most %d of the %d gated pods of %s may be unready (--max-unready-fraction %g), and this one is among the least loaded; would be %s: %s",
				allowed, len(idx), g, fraction, d.Unready.Reason, strings.TrimPrefix(d.Unready.Message, "llmdiag: ")))}
		}
	}
}

// allowedUnready is how many of a group of n pods may be held False.
func allowedUnready(n int, fraction float64) int {
	return int(math.Floor(fraction*float64(n) + 1e-9))
}

// Admit orders the plan's writes so that a group never has more than its
// allowed pods False at any moment, whatever order the writes land in: a
// pod the plan turns False while others of its group still hold False
// (their True not yet written) waits, keeping its current condition, until
// the group's pods False now and those admitted leave room. It returns how
// many it held back. Plan's output, its pods and fraction as Plan had
// them.
func Admit(pods []Pod, ds []Desired, fraction float64) (waiting int) {
	size, falseNow := map[string]int{}, map[string]int{}
	for i, d := range ds {
		if d.Group == "" {
			continue
		}
		size[d.Group]++
		if held(pods[i]) == 1 {
			falseNow[d.Group]++
		}
	}
	for i := range ds {
		d := &ds[i]
		if d.Group == "" || d.Cond == nil || d.Cond.Status != corev1.ConditionFalse || held(pods[i]) == 1 {
			continue
		}
		if falseNow[d.Group] < allowedUnready(size[d.Group], fraction) {
			falseNow[d.Group]++ // admitted: counts from now on
			continue
		}
		d.Cond, d.Waiting = pods[i].Current, true
		waiting++
	}
	return waiting
}

// held is 1 when the pod holds the condition False.
func held(p Pod) int {
	if p.Current != nil && p.Current.Status == corev1.ConditionFalse {
		return 1
	}
	return 0
}
