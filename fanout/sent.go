package fanout

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// sent is what a subscriber was last handed out of one node: 32 bytes.
type sent struct {
	score    float64
	status   llmdiagv1.Status
	cause    llmdiagv1.Cause
	nanos    int32 // of the observation time, when hasTime
	routable bool
	hasTime  bool  // false when the state carried no observation time
	secs     int64 // of the observation time (Unix), when hasTime
}

// sentOf is what handing out h records.
func sentOf(h *llmdiagv1.NodeHealth) sent {
	p := sent{score: h.GetLoadScore(), status: h.GetStatus(), cause: h.GetRootCause(), routable: h.GetRoutable()}
	if ts := h.GetObservedAt(); ts != nil {
		t := ts.AsTime()
		p.secs, p.nanos, p.hasTime = t.Unix(), int32(t.Nanosecond()), true
	}
	return p
}

// observedAfter reports whether t is after the observation time p records
// (which it must have: hasTime).
func (p sent) observedAfter(t time.Time) bool {
	s := t.Unix()
	return s > p.secs || (s == p.secs && int32(t.Nanosecond()) > p.nanos)
}

// fewSent is how many nodes a sentLog holds in a list before it moves them
// to a map: most streams select one node, and a one-entry map costs about
// 600 bytes where a one-entry list costs 48.
const fewSent = 8

// sentLog is what a subscriber was last handed out, per node: a list
// searched in order while it holds at most fewSent nodes, a map beyond.
type sentLog struct {
	few  []sentNode
	many map[string]sent
}

type sentNode struct {
	node string
	sent
}

func (l *sentLog) get(node string) (sent, bool) {
	if l.many != nil {
		p, ok := l.many[node]
		return p, ok
	}
	for i := range l.few {
		if l.few[i].node == node {
			return l.few[i].sent, true
		}
	}
	return sent{}, false
}

func (l *sentLog) put(node string, p sent) {
	if l.many != nil {
		l.many[node] = p
		return
	}
	for i := range l.few {
		if l.few[i].node == node {
			l.few[i].sent = p
			return
		}
	}
	if len(l.few) < fewSent {
		l.few = append(l.few, sentNode{node, p})
		return
	}
	l.many = make(map[string]sent, 2*fewSent)
	for _, e := range l.few {
		l.many[e.node] = e.sent
	}
	l.many[node] = p
	l.few = nil
}

func (l *sentLog) delete(node string) {
	if l.many != nil {
		delete(l.many, node)
		return
	}
	for i := range l.few {
		if l.few[i].node == node {
			last := len(l.few) - 1
			l.few[i] = l.few[last]
			l.few[last] = sentNode{}
			l.few = l.few[:last]
			return
		}
	}
}

// len is the number of nodes held.
func (l *sentLog) len() int {
	if l.many != nil {
		return len(l.many)
	}
	return len(l.few)
}
