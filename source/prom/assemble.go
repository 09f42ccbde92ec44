package prom

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
)

// assembly collects the results of one refresh, as they arrive, into
// per-node state, and turns that into observations. Its methods are safe
// for concurrent use.
type assembly struct {
	cfg      Config
	lifetime bool
	window   string
	seconds  float64 // window length; 0 for the lifetime
	t        time.Time

	mu         sync.Mutex
	engines    []*engineState
	firstErr   error
	identityOK bool // some identity query succeeded
	// invalid are node ids that fail fleet.ValidID, skipped (at most
	// maxInvalid kept; nInvalid counts them all).
	invalid  map[string]bool
	nInvalid int
	// roles are the values of the role labels each node's series carry
	// (the role query); roleErr why that query failed.
	roles   map[string][]engine.LabelValue
	roleErr string

	// buckets is distribution's scratch (finish runs one node at a time).
	buckets []histogram.Bucket
}

// maxInvalid bounds the invalid node ids an assembly remembers.
const maxInvalid = 1024

// engineState is what the queries of one engine told.
type engineState struct {
	m          *engine.Mapping
	modelNames []string // model labels, in order of preference
	nodes      map[string]*nodeState
	// seq is the nodes in the order first read (nodeState.seq): the
	// queries of a refresh mostly answer in one order, which add follows
	// rather than look each node up.
	seq []*nodeState
	// errs and warns concern every node of the engine: a failed query, a
	// Prometheus warning (text → the queries that returned it).
	errs  []string
	warns map[string][]string
	// nconc bounds the concepts of m, for per-node arrays.
	nconc int
	// identified: the engine's identity query succeeded; only then are its
	// nodes reported.
	identified bool
}

// nodeState is what the queries told about one node of one engine.
type nodeState struct {
	id         string
	seq        int     // index in engineState.seq
	live       bool    // in the identity result: has series now
	vanished   bool    // had series within the lookback, has none now
	down       bool    // up == 0 in a job serving the engine
	scrapeErr  string  // Prometheus's last scrape error of the target
	lastScrape float64 // Unix seconds of its newest series; 0 unknown
	model      string
	modelRank  int // index in engineState.modelNames of model's label
	dp, tp     []string
	pp, ep     []string
	vals       []val
	reps       []*replicas
	hists      []*hist
	created    float64
	errs       []string
	// lora holds per replica the newest LoRA info series; offload the KV
	// offload tier the node's families show ("" none).
	lora    []loraSeries
	offload string
}

// val is one number of a node and the run of the concept it came from.
type val struct {
	v   float64
	run int
	ok  bool
}

// set keeps v when it comes from a better (lower) run than the value held.
func (x *val) set(run int, v float64) {
	if !x.ok || run < x.run {
		*x = val{v: v, run: run, ok: true}
	}
}

type keyed struct {
	key   string
	v     float64
	ranks []string // for shapeRanked: the rank label values
}

// replicas are the per-replica values of a KV or info concept.
type replicas struct {
	run int
	agg engine.Agg
	vs  []keyed
}

type bucket struct {
	le, v float64
}

// hist is a histogram concept of a node: buckets (of one run), sum, count.
type hist struct {
	run        int
	buckets    []bucket
	sum, count val
	bad        bool
}

func newAssembly(cfg Config, lifetime bool, window string, dur time.Duration, t time.Time) *assembly {
	a := &assembly{cfg: cfg, lifetime: lifetime, window: window, t: t, invalid: map[string]bool{}, roles: map[string][]engine.LabelValue{}}
	if !lifetime {
		a.seconds = dur.Seconds()
	}
	return a
}

// engine registers m; call before any query of m runs.
func (a *assembly) engine(m *engine.Mapping) *engineState {
	es := &engineState{m: m, nodes: map[string]*nodeState{}, warns: map[string][]string{}}
	es.modelNames = uniq(slices.Concat([]string{m.ModelLabel}, m.ModelLabelFallbacks, a.cfg.ModelLabels)...)
	for c := range m.Concepts {
		es.nconc = max(es.nconc, int(c)+1)
	}
	for c := range m.Effects {
		es.nconc = max(es.nconc, int(c)+1)
	}
	if km, ok := engine.KVTransferMapping(m.Engine); ok {
		for c := range km.Concepts {
			es.nconc = max(es.nconc, int(c)+1)
		}
	}
	a.engines = append(a.engines, es)
	return es
}

func (a *assembly) engineOf(e llmdiagv1.Engine) *engineState {
	for _, es := range a.engines {
		if es.m.Engine == e {
			return es
		}
	}
	return nil
}

// nodeOf returns the state of node id, created on first use; nil when id
// is not a valid node id (fleet.ValidID), which is counted in a.
func (a *assembly) nodeOf(es *engineState, id string) *nodeState {
	ns := es.nodes[id]
	if ns == nil {
		if a.invalid[id] {
			return nil
		}
		if !fleet.ValidID(id) {
			if len(a.invalid) < maxInvalid {
				a.invalid[id] = true
			}
			a.nInvalid++
			return nil
		}
		ns = &nodeState{
			id:        id,
			seq:       len(es.seq),
			modelRank: len(es.modelNames),
			vals:      make([]val, es.nconc),
			reps:      make([]*replicas, es.nconc),
			hists:     make([]*hist, es.nconc),
		}
		es.nodes[id] = ns
		es.seq = append(es.seq, ns)
	}
	return ns
}

// fail records that q failed: its concept stays absent on every node of the
// engine.
func (a *assembly) fail(q query, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q.shape == shapeRole {
		// Not the nodes' data: their roles go unread.
		a.roleErr = err.Error()
		return
	}
	if a.firstErr == nil {
		a.firstErr = err
	}
	es := a.engineOf(q.engine)
	es.errs = append(es.errs, fmt.Sprintf("%s: %v", q.what(), err))
}

// engineErr records an error that concerns every node of es.
func (a *assembly) engineErr(es *engineState, msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	es.errs = append(es.errs, msg)
}

// enginesWithNodes are the engines whose identity found nodes.
func (a *assembly) enginesWithNodes() []llmdiagv1.Engine {
	var out []llmdiagv1.Engine
	for _, es := range a.engines {
		if n, _ := a.census(es); es.identified && n > 0 {
			out = append(out, es.m.Engine)
		}
	}
	return out
}

// census counts the nodes es has so far, and those not live.
func (a *assembly) census(es *engineState) (nodes, notLive int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ns := range es.nodes {
		if ns.live || ns.vanished || ns.down {
			nodes++
			if !ns.live {
				notLive++
			}
		}
	}
	return nodes, notLive
}

// targetErrs records Prometheus's last scrape error of the targets whose
// node label is a key of errs on the nodes that are not live.
func (a *assembly) targetErrs(errs map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, es := range a.engines {
		for id, ns := range es.nodes {
			if e := errs[id]; e != "" && !ns.live {
				ns.scrapeErr = e
			}
		}
	}
}

// add reads the result of q.
func (a *assembly) add(q query, vec *vector, warnings v1.Warnings) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q.shape == shapeRole {
		a.addRoles(q, vec)
		return
	}
	es := a.engineOf(q.engine)
	if q.shape == shapeIdentity {
		a.identityOK = true
		es.identified = true
	}
	for _, w := range warnings {
		es.warns[w] = append(es.warns[w], q.what())
	}
	m := es.m
	at := func(name string) int {
		if name == "" {
			return -1
		}
		return slices.Index(q.want, name)
	}
	ats := func(names []string) []int {
		out := make([]int, len(names))
		for i, n := range names {
			out[i] = at(n)
		}
		return out
	}
	var (
		dpAt, tpAt, leAt = at(m.DPLabel), at(m.TPLabel), at(model.BucketLabel)
		ppAt, epAt       = at(m.PPLabel), at(m.EPLabel)
		modelAt          = ats(es.modelNames)
		replicaAt        = ats(m.ReplicaLabels)
		rankAt           = ats(m.RankLabels)
		infoAt           = ats(q.info)
		effectAt         = at(effectLabel)
		loraAt           = ats([]string{engine.LoRARunningLabel, engine.LoRAWaitingLabel, engine.LoRAMaxLabel})
		les              = map[string]float64{}
		leSeq            []leSeen // by a bucket's place in its node's, the le last read there
		lastID           string
		ns               *nodeState
		next             int // in es.seq, the node after the last read
	)
	for i := range vec.len() {
		ls := vec.labels(i)
		id := ls[0]
		if id == "" {
			continue
		}
		if i == 0 || id != lastID {
			if next < len(es.seq) && es.seq[next].id == id {
				ns = es.seq[next]
			} else {
				ns = a.nodeOf(es, id)
			}
			lastID = id
			if ns != nil {
				next = ns.seq + 1
			}
		}
		if ns == nil {
			continue
		}
		v := vec.vs[i]
		switch q.shape {
		case shapeIdentity:
			switch {
			case v == identityDown:
				ns.down = true
			case v == identityVanished:
				ns.vanished = true
			default:
				ns.live = true
				ns.lastScrape = max(ns.lastScrape, v)
				ns.dp = addDistinct(ns.dp, ls, dpAt)
				ns.tp = addDistinct(ns.tp, ls, tpAt)
				ns.pp = addDistinct(ns.pp, ls, ppAt)
				ns.ep = addDistinct(ns.ep, ls, epAt)
			}
			ns.readModel(ls, modelAt)
		case shapeNode, shapeHistSum, shapeHistCount:
			if !finite(v) {
				ns.errs = append(ns.errs, fmt.Sprintf("%s: value is %v", q.what(), v))
				continue
			}
			if q.shape == shapeNode {
				ns.vals[q.concept].set(q.run, v)
				continue
			}
			h := ns.hist(q.concept)
			if q.shape == shapeHistSum {
				h.sum.set(q.run, v)
			} else {
				h.count.set(q.run, v)
			}
		case shapeReplica, shapeInfo, shapeRanked:
			if q.shape == shapeInfo {
				var err error
				if v, err = infoValue(ls, infoAt, q.info); err != nil {
					ns.errs = append(ns.errs, fmt.Sprintf("%s: %v", q.what(), err))
					continue
				}
			}
			ns.addReplica(q, ls, v, replicaAt, rankAt)
		case shapeEffects:
			a.addEffect(es, ns, q, ls, v, effectAt, replicaAt, rankAt, loraAt)
		case shapeBuckets:
			h := ns.hist(q.concept)
			switch {
			case h.buckets == nil:
				h.run, h.buckets = q.run, make([]bucket, 0, 24) // most layouts have fewer
			case q.run < h.run:
				h.run, h.buckets, h.bad = q.run, h.buckets[:0], false
			case q.run > h.run:
				continue
			}
			// Every node's buckets mostly come in one order: the le at a
			// bucket's place is the last node's there, or else looked up.
			at := len(h.buckets)
			var le float64
			if at < len(leSeq) && leSeq[at].text == ls[leAt] {
				le = leSeq[at].le
			} else {
				var ok bool
				if le, ok = les[ls[leAt]]; !ok {
					var err error
					if le, err = strconv.ParseFloat(ls[leAt], 64); err != nil {
						le = math.NaN()
					}
					les[ls[leAt]] = le
				}
				if at < maxLeSeq {
					leSeq = append(leSeq, make([]leSeen, max(at+1-len(leSeq), 0))...)
					leSeq[at] = leSeen{ls[leAt], le}
				}
			}
			if math.IsNaN(le) || !finite(v) || v < 0 {
				if !h.bad {
					ns.errs = append(ns.errs, fmt.Sprintf("%s: bucket le=%q has value %v", q.what(), ls[leAt], v))
				}
				h.bad = true
				continue
			}
			h.buckets = append(h.buckets, bucket{le: le, v: v})
		case shapeCreated:
			if v > 0 {
				ns.created = v
			}
		}
	}
}

// leSeen is a bucket bound as read (text) and parsed.
type leSeen struct {
	text string
	le   float64
}

// maxLeSeq bounds the places of buckets whose bound add remembers.
const maxLeSeq = 256

// addReplica reads one sample of a per-replica query (shapeReplica,
// shapeInfo, shapeRanked; v is the info product for shapeInfo) into the
// replicas of q's concept: those of the best run, per replica the lowest
// ranks for shapeRanked.
func (ns *nodeState) addReplica(q query, ls []string, v float64, replicaAt, rankAt []int) {
	if !finite(v) {
		ns.errs = append(ns.errs, fmt.Sprintf("%s: value is %v", q.what(), v))
		return
	}
	r := ns.reps[q.concept]
	switch {
	case r == nil || q.run < r.run:
		r = &replicas{run: q.run, agg: q.agg}
		ns.reps[q.concept] = r
	case q.run > r.run:
		return
	}
	k := keyed{key: replicaKey(ls, replicaAt), v: v}
	if q.shape == shapeRanked {
		k.ranks = pick(ls, rankAt)
		if i := slices.IndexFunc(r.vs, func(x keyed) bool { return x.key == k.key }); i >= 0 {
			// Another rank of a replica already read: keep the lowest.
			if compareRanks(k.ranks, r.vs[i].ranks) < 0 {
				r.vs[i] = k
			}
			return
		}
	}
	r.vs = append(r.vs, k)
}

// addRoles keeps the role label values of the role query q's answer, per
// node. (Its warnings concern no data.) a.mu must be held.
func (a *assembly) addRoles(q query, vec *vector) {
	for i := range vec.len() {
		ls := vec.labels(i)
		if ls[0] == "" {
			continue
		}
		for j, name := range q.want[1:] {
			if v := ls[j+1]; v != "" {
				a.roles[ls[0]] = append(a.roles[ls[0]], engine.LabelValue{Label: name, Value: v})
			}
		}
	}
}

func (ns *nodeState) hist(c engine.Concept) *hist {
	if ns.hists[c] == nil {
		ns.hists[c] = &hist{}
	}
	return ns.hists[c]
}

// readModel takes the model from the best model label the sample carries
// (at: the positions of engineState.models in its labels).
func (ns *nodeState) readModel(ls []string, at []int) {
	for i, j := range at[:ns.modelRank] {
		if j >= 0 && ls[j] != "" {
			ns.model, ns.modelRank = ls[j], i
			return
		}
	}
}

func addDistinct(seen []string, ls []string, at int) []string {
	if at < 0 || ls[at] == "" || slices.Contains(seen, ls[at]) {
		return seen
	}
	return append(seen, ls[at])
}

// infoValue is the product of the numeric values of the info labels.
func infoValue(ls []string, at []int, names []string) (float64, error) {
	v := 1.0
	for i, j := range at {
		s := ""
		if j >= 0 {
			s = ls[j]
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("label %s=%q is not a number", names[i], s)
		}
		v *= f
	}
	return v, nil
}

// pick returns the labels at the positions at ("" where absent).
func pick(ls []string, at []int) []string {
	out := make([]string, len(at))
	for i, j := range at {
		if j >= 0 {
			out[i] = ls[j]
		}
	}
	return out
}

// compareRanks orders rank label values as engine.Extract does: in label
// order, numerically where both are integers.
func compareRanks(a, b []string) int {
	for i := range a {
		x, errX := strconv.ParseInt(a[i], 10, 64)
		y, errY := strconv.ParseInt(b[i], 10, 64)
		c := cmp.Compare(a[i], b[i])
		if errX == nil && errY == nil {
			c = cmp.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func replicaKey(ls []string, at []int) string {
	if len(at) == 1 && at[0] >= 0 {
		return ls[at[0]]
	}
	parts := make([]string, len(at))
	for i, j := range at {
		if j >= 0 {
			parts[i] = ls[j]
		}
	}
	return strings.Join(parts, "\xff")
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// score is how much of m's data a node has: the concepts with a value.
func (ns *nodeState) score() int {
	n := 0
	for i := range ns.vals {
		if ns.vals[i].ok || (ns.reps[i] != nil && len(ns.reps[i].vs) > 0) || (ns.hists[i] != nil && len(ns.hists[i].buckets) > 0) {
			n++
		}
	}
	if ns.live {
		n++
	}
	return n
}

// observations turns the collected state into one observation per node,
// sorted by id. A node seen by several engines (an endpoint exposing the
// families of two) is read as the engine that gave most of its concepts,
// the first in table order on a tie.
func (a *assembly) observations() []source.Observation {
	a.mu.Lock()
	defer a.mu.Unlock()
	type pick struct {
		es    *engineState
		ns    *nodeState
		score int
	}
	best := map[string]pick{}
	for _, es := range a.engines {
		if !es.identified {
			// Without identity no node of the engine is known: data that
			// arrived for it is not enough to say a node exists.
			continue
		}
		// Queries finish in any order: keep the output deterministic.
		slices.Sort(es.errs)
		for id, ns := range es.nodes {
			if !ns.live && !ns.vanished && !ns.down {
				// In a data query only (a rate over the window of a node
				// gone longer than the lookback): not a node now.
				continue
			}
			slices.Sort(ns.errs)
			sc := ns.score()
			if p, ok := best[id]; !ok || sc > p.score {
				best[id] = pick{es, ns, sc}
			}
		}
	}
	ids := slices.Sorted(maps.Keys(best))
	obs := make([]source.Observation, len(ids))
	for i, id := range ids {
		p := best[id]
		nm, smp := a.finish(p.es, p.ns)
		obs[i] = source.Observation{
			Node:    fleet.Node{ID: id, Model: nm.Model, Engine: fleet.EngineName(p.es.m.Engine)},
			Engine:  p.es.m.Engine,
			Sample:  smp,
			Metrics: nm,
		}
	}
	return obs
}

// finish computes one node's indicators.
func (a *assembly) finish(es *engineState, ns *nodeState) (*llmdiagv1.NodeMetrics, *sample.Sample) {
	up := ns.live
	observed := a.t
	if ns.live && ns.lastScrape > 0 {
		sec, frac := math.Modf(ns.lastScrape)
		observed = time.Unix(int64(sec), int64(math.Round(frac*1e3))*1e6).UTC()
	}
	staleness, stale := metrics.Staleness(observed, a.t, a.cfg.StaleAfter)
	nm := &llmdiagv1.NodeMetrics{
		Node:       ns.id,
		Model:      ns.model,
		Engine:     es.m.Engine,
		Window:     a.window,
		ObservedAt: timestamppb.New(observed),
		Staleness:  durationpb.New(staleness),
		Stale:      stale,
		Up:         up,
		Warnings:   es.warnings(),
	}
	if !a.lifetime && up {
		nm.Covered = durationpb.New(time.Duration(a.seconds * float64(time.Second)))
	}
	get := func(c engine.Concept) *float64 {
		if c < 0 || int(c) >= len(ns.vals) {
			return nil
		}
		if ns.vals[c].ok {
			return sample.F(ns.vals[c].v)
		}
		if r := ns.reps[c]; r != nil && len(r.vs) > 0 && !isKV(c) {
			return finiteOrNil(aggregate(r))
		}
		return nil
	}
	nm.Queue = get(engine.Queue)
	nm.Running = get(engine.Running)
	nm.QueueRunningRatio = metrics.QueueRunningRatio(nm.Queue, nm.Running)
	nm.KvPressure, nm.KvCapacityTokens = ns.kv()
	rate := func(c engine.Concept) *float64 {
		v := get(c)
		if v == nil || !a.lifetime {
			return v
		}
		// Lifetime: the counter over the time since the counters started.
		if secs := float64(a.t.UnixMilli())/1e3 - ns.created; ns.created > 0 && secs > 0 {
			return sample.F(*v / secs)
		}
		return nil
	}
	nm.PromptTokensPerSecond = rate(engine.PromptTokens)
	nm.GenerationTokensPerSecond = rate(engine.GenerationTokens)
	nm.PreemptionsPerSecond = rate(engine.Preemptions)
	nm.RequestsPerSecond = rate(engine.RequestsFinished)
	nm.AbortedRequestsPerSecond = rate(engine.RequestsAborted)
	dist := func(c engine.Concept, sum, count engine.Concept) *llmdiagv1.Distribution {
		if d := a.distribution(ns, c); d != nil {
			return d
		}
		return a.total(get(sum), get(count))
	}
	nm.Ttft = dist(engine.TTFT, -1, -1)
	nm.E2E = dist(engine.E2E, engine.E2ESum, engine.E2ECount)
	nm.InterToken = dist(engine.ITL, -1, -1)
	nm.TimePerOutputToken = dist(engine.TPOT, -1, -1)
	nm.QueueTime = dist(engine.QueueTime, engine.QueueTimeSum, engine.QueueTimeCount)
	metrics.SetPerRequestDecode(nm)
	ns.setEffects(nm)
	kv := a.disagg(nm, es, ns, get, rate)
	nm.Errors = slices.Concat(es.errs, ns.errs)
	switch {
	case up:
	case ns.scrapeErr != "":
		nm.Errors = append(nm.Errors, "prometheus cannot scrape the target (up == 0): "+ns.scrapeErr)
	case ns.down:
		nm.Errors = append(nm.Errors, "prometheus cannot scrape the target (up == 0); its last error is not known")
	default:
		nm.Errors = append(nm.Errors, fmt.Sprintf("no series at %s: target down or no longer exporting", a.t.UTC().Format(time.RFC3339)))
	}

	smp := &sample.Sample{
		At:               observed,
		Up:               up,
		Engine:           es.m.Engine,
		Model:            ns.model,
		Queue:            nm.Queue,
		Running:          nm.Running,
		KVUsage:          nm.KvPressure,
		KVCapacityTokens: nm.KvCapacityTokens,
		DataParallel:     len(ns.dp),
		TensorParallel:   len(ns.tp),
		PipelineParallel: len(ns.pp),
		ExpertParallel:   len(ns.ep),
		// The effects are NodeMetrics' (a sample's counters are
		// cumulative, and prom reads rates): the sample keeps the tier.
		Effects:    sample.Effects{KVOffload: ns.offload},
		Role:       nm.Role,
		RoleSource: nm.RoleSource,
		KVTransfer: kv,
		Errors:     nm.Errors,
	}
	return nm, smp
}

// disagg fills the role of a node and its KV-transfer rates as direct
// scraping does (engine.Extract, metrics.Compute): the role its series'
// labels say (engine.RoleFrom), the KV-transfer counters where its engine
// reads them for that role (engine.ReadsKVTransfers), the mean time of a
// transfer as their seconds over their count. get and rate are finish's.
// It returns the counters for the sample: cumulative for the lifetime,
// none over a window (rates are not counters).
func (a *assembly) disagg(nm *llmdiagv1.NodeMetrics, es *engineState, ns *nodeState, get, rate func(engine.Concept) *float64) sample.KVTransfer {
	if a.roleErr != "" {
		nm.Warnings = append(nm.Warnings, "role: "+a.roleErr+": the role is not read from the labels")
	}
	nm.Role, nm.RoleSource = engine.RoleFrom(a.roles[ns.id])
	if !engine.ReadsKVTransfers(es.m.Engine, nm.Role) {
		return sample.KVTransfer{}
	}
	nm.KvTransfersPerSecond = rate(engine.KVTransfers)
	nm.KvTransferBytesPerSecond = rate(engine.KVTransferBytes)
	nm.KvTransferFailuresPerSecond = rate(engine.KVTransferFailures)
	if n, t := nm.KvTransfersPerSecond, rate(engine.KVTransferSeconds); n != nil && t != nil && *n > 0 {
		nm.KvTransferSecondsMean = sample.F(*t / *n)
	}
	if !a.lifetime {
		return sample.KVTransfer{}
	}
	return sample.KVTransfer{
		Count: get(engine.KVTransfers), Seconds: get(engine.KVTransferSeconds),
		Bytes: get(engine.KVTransferBytes), Failures: get(engine.KVTransferFailures),
	}
}

// warnings are the engine's Prometheus warnings, each with the queries that
// returned it.
func (es *engineState) warnings() []string {
	if len(es.warns) == 0 {
		return nil
	}
	out := make([]string, 0, len(es.warns))
	for _, w := range slices.Sorted(maps.Keys(es.warns)) {
		qs := slices.Compact(slices.Sorted(slices.Values(es.warns[w])))
		out = append(out, fmt.Sprintf("prometheus: %s (%s)", w, strings.Join(qs, ", ")))
	}
	return out
}

// kv returns KV usage and capacity in tokens, combined by engine.CombineKV
// as direct scraping combines them.
func (ns *nodeState) kv() (usage, capacity *float64) {
	rep := func(c engine.Concept) *replicas {
		if int(c) < len(ns.reps) && ns.reps[c] != nil && len(ns.reps[c].vs) > 0 {
			return ns.reps[c]
		}
		return nil
	}
	var agg engine.Agg
	us := rep(engine.KVUsage)
	if us != nil {
		agg = us.agg
	}
	kv := engine.CombineKV(us.replicas(), agg, rep(engine.KVUsedTokens).replicas(), rep(engine.KVCapacityTokens).replicas())
	if kv.HasCapacity {
		capacity = finiteOrNil(kv.Capacity)
	}
	if kv.HasUsage {
		usage = finiteOrNil(kv.Usage)
	}
	return usage, capacity
}

// replicas returns r's values for engine.CombineKV; nil when r is.
func (r *replicas) replicas() []engine.Replica {
	if r == nil {
		return nil
	}
	out := make([]engine.Replica, len(r.vs))
	for i, k := range r.vs {
		out[i] = engine.Replica{Key: k.key, V: k.v}
	}
	return out
}

// aggregate combines the replicas of a concept as their Source.Agg says.
func aggregate(r *replicas) float64 {
	switch r.agg {
	case engine.Mean, engine.CapacityWeighted:
		return sumOf(r.vs) / float64(len(r.vs))
	case engine.Max:
		m := r.vs[0].v
		for _, v := range r.vs[1:] {
			m = max(m, v.v)
		}
		return m
	}
	return sumOf(r.vs)
}

func finiteOrNil(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return sample.F(v)
}

func sumOf(vs []keyed) float64 {
	var t float64
	for _, v := range vs {
		t += v.v
	}
	return t
}

// distribution is histogram concept c of a node over the window; nil when
// the node has no buckets for it. Quantiles are computed on the values as
// Prometheus returned them (bucket rates, or cumulative counts for the
// lifetime), as histogram_quantile would; counts and sums are then scaled
// to the window.
func (a *assembly) distribution(ns *nodeState, c engine.Concept) *llmdiagv1.Distribution {
	if int(c) >= len(ns.hists) || ns.hists[c] == nil {
		return nil
	}
	hs := ns.hists[c]
	if hs.bad || len(hs.buckets) == 0 {
		return nil
	}
	bs := hs.buckets
	slices.SortFunc(bs, func(x, y bucket) int { return cmp.Compare(x.le, y.le) })
	h := &sample.Histogram{Bounds: make([]float64, 0, len(bs)), Counts: make([]float64, 0, len(bs))}
	for _, b := range bs {
		// Bounds spelled differently ("1" and "1.0") are one bucket, as in
		// histogram_quantile.
		if n := len(h.Bounds); n > 0 && h.Bounds[n-1] == b.le {
			h.Counts[n-1] += b.v
			continue
		}
		h.Bounds = append(h.Bounds, b.le)
		h.Counts = append(h.Counts, b.v)
	}
	if !math.IsInf(h.Bounds[len(h.Bounds)-1], +1) {
		ns.errs = append(ns.errs, fmt.Sprintf("%s: no +Inf bucket", c))
		return nil
	}
	h.Count = h.Counts[len(h.Counts)-1]
	if hs.count.ok {
		h.Count = hs.count.v
	}
	h.Sum = hs.sum.v
	d := metrics.DistributionOf(h, a.cfg.Quantiles, &a.buckets)
	if !hs.sum.ok {
		d.Mean = nil
	}
	if !a.lifetime {
		d.Count *= a.seconds
		d.Sum *= a.seconds
		for i := range d.BucketCounts {
			d.BucketCounts[i] *= a.seconds
		}
	}
	return d
}

// total is a latency exposed only as a sum and a count (rates, or
// cumulative for the lifetime): a mean, no percentile.
func (a *assembly) total(sum, count *float64) *llmdiagv1.Distribution {
	if sum == nil || count == nil {
		return nil
	}
	d := &llmdiagv1.Distribution{Count: *count, Sum: *sum}
	if *count > 0 {
		d.Mean = sample.F(*sum / *count)
	}
	if !a.lifetime {
		d.Count *= a.seconds
		d.Sum *= a.seconds
	}
	return d
}
