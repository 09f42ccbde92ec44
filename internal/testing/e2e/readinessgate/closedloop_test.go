package readinessgate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/loadgen"
	"github.com/llmdiag/llmdiag/sim"
)

// The closed loop's workload and world.
const (
	loopSlots    = 16    // batch slots of each engine
	loopPrompt   = 256   // prompt tokens of every request
	loopOutput   = 32    // output tokens of every request
	loopSpeed    = 0.125 // simulated seconds per wall second
	loopLoad     = 0.7   // offered load, of the four engines' capacity
	loopSlowdown = 10    // SetSlowdown's factor
	loopFast     = 250 * time.Millisecond
	loopInterval = 5 * time.Second // serve's --interval (its default)
	// leaveWithin bounds the stalled pod's fault start to its endpoint
	// not ready: llmdiag's stall detection, at worst StalledMinFor
	// rounded up to whole refresh intervals plus the interval before the
	// first refresh that reads the frozen counters (15 s with the
	// defaults), plus refreshSlack for that refresh's own scrapes and
	// diagnosis, then the gate's write, the kubelet's Ready and the
	// EndpointSlice controller, which the other test bounds at 2 s
	// (gateToSlice). A hung engine's queue grows with every request it
	// receives, so the fast lane may find it saturated sooner.
	gateToSlice  = 2 * time.Second
	refreshSlack = time.Second
)

// leaveWithin is the bound above, from the default thresholds.
func leaveWithin() time.Duration {
	minFor := diagnose.DefaultThresholds().StalledMinFor
	refreshes := (minFor + loopInterval - 1) / loopInterval
	return time.Duration(refreshes+1)*loopInterval + refreshSlack + gateToSlice
}

// TestClosedLoop closes the loop through the readiness gate: four pods of
// one model in front of simulated engines whose only load is what they
// receive, a Service selecting them, a Service proxy sending each request
// to an endpoint the Service's EndpointSlices list as ready, and loadgen
// offering 70% of the four engines' capacity through it. One engine is
// slowed tenfold for a phase, restored, then hung for a phase. The test
// measures how long each faulty pod stays a ready endpoint after its
// fault begins, when llmdiag marks it unroutable (and STALLED), and what
// the clients see in each phase; it asserts that the hung pod leaves the
// EndpointSlice within leaveWithin and gets no request once it has.
func TestClosedLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real control plane, four simulated engines, a Service proxy and loadgen for about two minutes")
	}
	c := kubetest.Start(t, kubetest.Options{ControllerManager: true})
	c.CreateNode(t, kubeNode, "127.0.0.1")
	c.Namespace(t, ns)
	c.RunKubelet(t, ns)

	// Four GLM engines (SGLang, TP=8 on H100), external load only, with
	// 16 batch slots each, at an eighth of real time so that the streams
	// stay few enough for two shared cores.
	cfg := simtest.Scenario(t, "overloaded", 1)
	base := cfg.Nodes[0]
	base.Perf.MaxNumSeqs = loopSlots
	base.Workload.QueueTimeout = 0
	cfg.Nodes = nil
	for i := range pods {
		n := base
		n.ID = fmt.Sprintf("glm-4.6-%d", i)
		cfg.Nodes = append(cfg.Nodes, n)
	}
	cfg = sim.ExternalOnly(cfg)
	cfg.Speed, cfg.Warmup = loopSpeed, 0
	cfg.Tick = time.Duration(float64(20*time.Millisecond) * loopSpeed) // a wake-up every 20 ms of wall time
	capacity, step := capacityOf(base.Perf)
	rate := loopLoad * pods * capacity
	t.Logf("capacity: an iteration at a full batch takes %v (simulated), so one engine serves %.2f requests a wall second and four %.2f; offered %.2f/s (%.0f%%)",
		step.Round(time.Microsecond), capacity, pods*capacity, rate, 100*loopLoad)

	rec := newRecorder(t, c)
	podsIn := map[string]*podPort{}
	fl := gatedPods(t, c, ns, cfg, func(pod string, engine *url.URL) string {
		pp := newPodPort(t, engine)
		podsIn[pod] = pp
		return pp.addr
	})
	sp := newServiceProxy(t, c, podsIn)

	sd := filepath.Join(t.TempDir(), "discovery.yaml")
	writeFile(t, sd, fmt.Sprintf(discovery, c.Kubeconfig, ns))
	a := startServe(t, "a", []string{"serve", "--discovery", sd, "--interval", loopInterval.String(), "--fast-interval", loopFast.String(),
		"--readiness-gate", gate, "--max-unready-fraction", "0.5"})
	var last string
	clitest.WaitFor(t, "every endpoint of service glm ready in the proxy", wait, func() bool {
		last = rec.describe()
		return len(sp.ready()) == pods
	}, &last)
	sp.resetMaxOut()

	// Traffic runs without a gap across the phases: each phase's loadgen
	// starts when the previous one's arrivals end; a phase's figures are
	// those of the requests that arrived in it.
	hot, hotNode, hotEngine := "glm-1", ns+"/glm-1:8000", "glm-4.6-1"
	watch := a.pollRoutable(t, hotNode)
	var lg sync.WaitGroup
	var phases []*phaseRun
	phase := func(name string, d time.Duration) *phaseRun {
		p := &phaseRun{name: name, start: time.Now(), d: d}
		phases = append(phases, p)
		seed := uint64(len(phases))
		lg.Go(func() {
			p.res, p.err = loadgen.Run(t.Context(), loadgen.Config{
				URL: sp.url + "/v1/completions", Rate: rate, Duration: d, Stream: true,
				Prompt: loadgen.Dist{{Weight: 1, Lo: loopPrompt, Hi: loopPrompt}}, Output: loadgen.Dist{{Weight: 1, Lo: loopOutput, Hi: loopOutput}},
				MaxInFlight: 512, Timeout: 40 * time.Second, Model: "glm-4.6", Seed: seed,
			})
		})
		<-time.After(d) // the phase's length, a measurement window: traffic runs meanwhile
		return p
	}

	phase("baseline", 15*time.Second)
	baseSent := sp.picks(hot)

	// Slowed tenfold: a quarter of 70% of four engines' load on an engine
	// with a tenth of its capacity.
	slowAt := time.Now()
	if err := fl.SetSlowdown(hotEngine, loopSlowdown); err != nil {
		t.Fatal(err)
	}
	slowPhase := phase("slowed", 30*time.Second)
	slowEnd := time.Now()
	slowSent := sp.picks(hot) - baseSent
	slowTL := sp.timeline(hot, slowAt, slowEnd)
	slowRoutes := watch.since(slowAt, slowEnd)
	t.Logf("measured: slowed %s: endpoint %s; /routable %s", hot, slowTL, slowRoutes)
	if out := sp.notReadyAt(hot, slowAt); !out.IsZero() && out.Before(slowEnd) {
		t.Logf("measured: the slowed %s stayed a ready endpoint %v after its slowdown began (llmdiag marked it unroutable after %v); then %d more times in and out",
			hot, out.Sub(slowAt).Round(time.Millisecond), slowRoutes.firstNot().Sub(slowAt).Round(time.Millisecond), slowTL.readyAgain())
	} else {
		t.Logf("measured: the slowed %s stayed a ready endpoint for the whole phase", hot)
	}

	// Restored, back in the Service before the hang.
	if err := fl.SetSlowdown(hotEngine, 1); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	clitest.WaitFor(t, hot+"'s endpoint ready again once restored", wait, func() bool {
		last = rec.describe()
		return slices.Contains(sp.ready(), hot) && watch.code() == http.StatusOK
	}, &last)
	t.Logf("measured: %s routable and its endpoint ready %v after its speed was restored", hot, time.Since(restored).Round(time.Millisecond))
	phase("restored", 5*time.Second)

	// Hung: it keeps answering /metrics, its queue grows with every
	// request it receives, and none of them ends.
	hangAt := time.Now()
	hungPicks := sp.picks(hot)
	if err := fl.SetHang(hotEngine, true); err != nil {
		t.Fatal(err)
	}
	phase("stalled", 25*time.Second)
	hangEnd := time.Now()
	hangTL := sp.timeline(hot, hangAt, hangEnd)
	hangRoutes := watch.since(hangAt, hangEnd)
	t.Logf("measured: stalled %s: endpoint %s; /routable %s", hot, hangTL, hangRoutes)
	if out := sp.notReadyAt(hot, hangAt); !out.IsZero() && out.Before(hangEnd) {
		t.Logf("measured: the stalled %s stayed a ready endpoint %v after its hang began (llmdiag marked it unroutable after %v)",
			hot, out.Sub(hangAt).Round(time.Millisecond), hangRoutes.firstNot().Sub(hangAt).Round(time.Millisecond))
	}
	notReady := sp.notReadyAt(hot, hangAt)
	out := hangEnd // the end of its time out of the Service in the phase
	if back := sp.readyAgainAt(hot, notReady); !notReady.IsZero() && !back.IsZero() && back.Before(hangEnd) {
		out = back
	}
	sentAfter := sp.picksBetween(hot, notReady, out)
	arrivedBy, lastArrival := podsIn[hot].arrivals()
	picked := sp.picks(hot)
	// Release the hang so that the requests it holds end before loadgen's
	// timeout, then gather every phase's figures.
	if err := fl.SetHang(hotEngine, false); err != nil {
		t.Fatal(err)
	}
	lg.Wait()
	for _, p := range phases {
		if p.err != nil {
			t.Fatalf("loadgen %s: %v", p.name, p.err)
		}
		r := p.res
		var ttft loadgen.Percentiles
		if r.TTFT != nil {
			ttft = *r.TTFT
		}
		t.Logf("measured: phase %-8s %4.0fs: sent %d ok %d failed %v skipped %d; TTFT p50 %.3f p99 %.3f s; E2E p50 %.3f p99 %.3f s",
			p.name, p.d.Seconds(), r.Sent, r.Succeeded, r.Failures, r.Skipped, ttft.P50, ttft.P99, r.E2E.P50, r.E2E.P99)
	}
	t.Logf("measured: the proxy sent the slowed %s %d of the slowed phase's %d requests (a quarter: %d); the hung one %d before it left",
		hot, slowSent, slowPhase.res.Sent, slowPhase.res.Sent/pods, picked-hungPicks)
	if t.Failed() {
		return
	}

	// What must hold. The hung pod leaves the EndpointSlice within the
	// bound, stays out for the phase, and gets no request once out.
	if notReady.IsZero() {
		t.Fatalf("%s's endpoint stayed ready for the whole stalled phase (%v): %s", hot, hangEnd.Sub(hangAt), hangTL)
	}
	if in := notReady.Sub(hangAt); in > leaveWithin() {
		t.Errorf("%s's endpoint not ready %v after its engine hung, want within %v (stall detection + gate + EndpointSlice)", hot, in, leaveWithin())
	}
	if back := sp.readyAgainAt(hot, notReady); !back.IsZero() && back.Before(hangEnd) {
		t.Errorf("%s's endpoint ready again %v into the hang, want it out while the engine is hung: %s", hot, back.Sub(hangAt), hangTL)
	}
	if sentAfter != 0 {
		t.Errorf("the proxy sent %s %d requests while its endpoint was not ready", hot, sentAfter)
	}
	if arrivedBy != picked {
		t.Errorf("%s's port received %d completion requests, the proxy sent it %d: want every request to come through the Service proxy", hot, arrivedBy, picked)
	}
	t.Logf("measured: %s's last request arrived %v after the hang began; its endpoint went not ready %v after",
		hot, lastArrival.Sub(hangAt).Round(time.Millisecond), notReady.Sub(hangAt).Round(time.Millisecond))
	if at := hangRoutes.first("CAUSE_STALLED"); !at.IsZero() {
		t.Logf("measured: llmdiag called %s STALLED %v after its engine hung", hot, at.Sub(hangAt).Round(time.Millisecond))
	} else {
		t.Logf("measured: llmdiag did not call %s STALLED within the phase", hot)
	}
	if marked := hangRoutes.firstNot(); marked.IsZero() {
		t.Errorf("llmdiag never marked the hung %s unroutable", hot)
	} else if d := notReady.Sub(marked); d > gateToSlice {
		t.Errorf("%s's endpoint not ready %v after llmdiag marked it unroutable, want within %v", hot, d, gateToSlice)
	}

	// The slowed pod: whatever llmdiag decided, the endpoint follows it.
	// Ready (in the proxy's view) while llmdiag calls it routable, out
	// within the gate's bound each time it marks it unroutable.
	if slowRoutes.firstNot().IsZero() {
		if !slowTL.readyThroughout() {
			t.Errorf("llmdiag kept the slowed %s routable, yet its endpoint left the Service: %s", hot, slowTL)
		}
	}
	for _, marked := range slowRoutes.marks() {
		if slowEnd.Sub(marked) < gateToSlice {
			continue // the phase ended first
		}
		if out := sp.notReadyAt(hot, marked.Add(-gateToSlice)); out.IsZero() || out.Sub(marked) > gateToSlice {
			t.Errorf("llmdiag marked the slowed %s unroutable %v into the phase; its endpoint: %s; want it not ready within %v",
				hot, marked.Sub(slowAt), slowTL, gateToSlice)
		}
	}
	// The others: never more than half of the pods out at once.
	if m := sp.maxOut(); m > pods/2 {
		t.Errorf("%d endpoints not ready at once, want at most %d (--max-unready-fraction 0.5)", m, pods/2)
	}
	t.Logf("measured: changes of the other pods' endpoints once traffic began: %s", sp.others(hot, phases[0].start))
}

// capacityOf is one engine's capacity in requests a wall second under the
// test's workload, from the simulator's performance model, and the time of
// one iteration at a full batch of loopSlots: StepBase + StepPerSeq a
// sequence + StepPerKContext a thousand tokens of the batch's context (at
// its mean, prompt and half the output; the prompt's own compute,
// prompt / PrefillTokensPerSec, is a few milliseconds more). A request
// needs loopOutput/loopSlots of a decode iteration (each gives every
// sequence of the batch a token) and, at worst, a prefill iteration of its
// own, which SGLang runs apart, holding the batch's decode: at most
// 1 / (iteration × (1 + loopOutput/loopSlots)) requests a simulated
// second. It is a lower bound: prefills that arrive together share one
// iteration.
func capacityOf(p sim.Perf) (perSecond float64, step time.Duration) {
	ctx := float64(loopSlots) * (loopPrompt + loopOutput/2.0) / 1000
	step = p.StepBase + time.Duration(loopSlots)*p.StepPerSeq + time.Duration(ctx*float64(p.StepPerKContext))
	simPerReq := step.Seconds()*(1+float64(loopOutput)/loopSlots) + loopPrompt/p.PrefillTokensPerSec
	return loopSpeed / simPerReq, step
}

// phaseRun is one phase of traffic.
type phaseRun struct {
	name  string
	start time.Time
	d     time.Duration
	res   *loadgen.Result
	err   error
}

// podPort is a pod's port: a reverse proxy to its engine that counts the
// completion requests it receives (not llmdiag's scrapes).
type podPort struct {
	addr string
	mu   sync.Mutex
	n    int
	last time.Time
}

func newPodPort(t *testing.T, engine *url.URL) *podPort {
	p := &podPort{}
	rp := httputil.NewSingleHostReverseProxy(engine)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			p.mu.Lock()
			p.n++
			p.last = time.Now()
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.addr = strings.TrimPrefix(srv.URL, "http://")
	return p
}

func (p *podPort) arrivals() (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.last
}

// serviceProxy stands in for kube-proxy (or an InferencePool's router):
// it sends each request to one of the endpoints the Service's
// EndpointSlices list as ready, round robin, as kube-proxy does: a
// Service's traffic goes only to ready endpoints as long as some are
// ready (kube-proxy falls back to serving-but-terminating endpoints when
// none is, which this world never has: it answers 503 then). It watches
// the EndpointSlices with an informer and keeps, per pod, every change of
// its endpoint's readiness and the time of every request it sent it.
type serviceProxy struct {
	url string
	rr  atomic.Uint64

	mu      sync.Mutex
	slices  map[string][]discoveryv1.Endpoint // by slice name
	readyOf map[string]bool                   // by pod
	changes map[string][]change               // by pod
	sent    map[string][]time.Time            // by pod
	maxOutN int
}

// change is an endpoint's readiness from at on.
type change struct {
	at    time.Time
	ready bool
}

func newServiceProxy(t *testing.T, c *kubetest.Cluster, podsIn map[string]*podPort) *serviceProxy {
	sp := &serviceProxy{slices: map[string][]discoveryv1.Endpoint{}, readyOf: map[string]bool{},
		changes: map[string][]change{}, sent: map[string][]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	inf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(c.Client.DiscoveryV1().RESTClient(), "endpointslices", ns, fields.Everything()),
		&discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sp.update(obj.(*discoveryv1.EndpointSlice), false) },
		UpdateFunc: func(_, obj any) { sp.update(obj.(*discoveryv1.EndpointSlice), false) },
		DeleteFunc: func(obj any) {
			if es, ok := obj.(*discoveryv1.EndpointSlice); ok {
				sp.update(es, true)
			}
		},
	})
	wg.Go(func() { inf.RunWithContext(ctx) })
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			pod := r.In.Context().Value(podKey{}).(string)
			r.SetURL(&url.URL{Scheme: "http", Host: podsIn[pod].addr})
		},
		FlushInterval: -1, // stream every chunk at once
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pod, ok := sp.pick()
		if !ok {
			http.Error(w, "no ready endpoint", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), podKey{}, pod)))
	}))
	sp.url = srv.URL
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); cancel(); wg.Wait() })
	return sp
}

type podKey struct{}

func (sp *serviceProxy) update(es *discoveryv1.EndpointSlice, deleted bool) {
	if es.Labels[discoveryv1.LabelServiceName] != "glm" {
		return
	}
	now := time.Now()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if deleted {
		delete(sp.slices, es.Name)
	} else {
		sp.slices[es.Name] = es.Endpoints
	}
	ready := map[string]bool{}
	for _, eps := range sp.slices {
		for _, ep := range eps {
			if ep.TargetRef != nil && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready[ep.TargetRef.Name] = true
			}
		}
	}
	for i := range pods {
		pod := fmt.Sprintf("glm-%d", i)
		if ready[pod] != sp.readyOf[pod] || len(sp.changes[pod]) == 0 {
			sp.changes[pod] = append(sp.changes[pod], change{at: now, ready: ready[pod]})
		}
	}
	sp.readyOf = ready
	sp.maxOutN = max(sp.maxOutN, pods-len(ready))
}

// pick is the next ready endpoint, round robin, recording the request.
func (sp *serviceProxy) pick() (string, bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var ready []string
	for pod, ok := range sp.readyOf {
		if ok {
			ready = append(ready, pod)
		}
	}
	if len(ready) == 0 {
		return "", false
	}
	slices.Sort(ready)
	pod := ready[sp.rr.Add(1)%uint64(len(ready))]
	sp.sent[pod] = append(sp.sent[pod], time.Now())
	return pod, true
}

func (sp *serviceProxy) ready() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []string
	for pod, ok := range sp.readyOf {
		if ok {
			out = append(out, pod)
		}
	}
	slices.Sort(out)
	return out
}

func (sp *serviceProxy) picks(pod string) int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.sent[pod])
}

// picksBetween counts the requests sent to pod after from and before to
// (none when from is zero).
func (sp *serviceProxy) picksBetween(pod string, from, to time.Time) int {
	if from.IsZero() {
		return 0
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := 0
	for _, at := range sp.sent[pod] {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (sp *serviceProxy) resetMaxOut() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.maxOutN = 0
}

func (sp *serviceProxy) maxOut() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.maxOutN
}

// notReadyAt is the first time after from pod's endpoint turned not ready
// (zero: it did not).
func (sp *serviceProxy) notReadyAt(pod string, from time.Time) time.Time {
	return sp.firstAfter(pod, from, false)
}

// readyAgainAt is the first time after from pod's endpoint turned ready.
func (sp *serviceProxy) readyAgainAt(pod string, from time.Time) time.Time {
	return sp.firstAfter(pod, from, true)
}

func (sp *serviceProxy) firstAfter(pod string, from time.Time, ready bool) time.Time {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, c := range sp.changes[pod] {
		if c.at.After(from) && c.ready == ready {
			return c.at
		}
	}
	return time.Time{}
}

// timeline is pod's endpoint from from to to.
func (sp *serviceProxy) timeline(pod string, from, to time.Time) timeline {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	tl := timeline{from: from, to: to, ready: false}
	for _, c := range sp.changes[pod] {
		switch {
		case !c.at.After(from):
			tl.ready = c.ready
		case c.at.Before(to):
			tl.changes = append(tl.changes, c)
		}
	}
	return tl
}

// others counts the changes of the other pods' endpoints after from.
func (sp *serviceProxy) others(hot string, from time.Time) string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var b strings.Builder
	for i := range pods {
		pod := fmt.Sprintf("glm-%d", i)
		if pod == hot {
			continue
		}
		n := 0
		for _, c := range sp.changes[pod] {
			if c.at.After(from) {
				n++
			}
		}
		fmt.Fprintf(&b, "%s %d; ", pod, n)
	}
	return b.String()
}

// timeline is an endpoint's readiness over a phase: ready at its start,
// then its changes.
type timeline struct {
	from, to time.Time
	ready    bool
	changes  []change
}

// readyAgain is how many times the endpoint turned ready in the phase.
func (tl timeline) readyAgain() int {
	n := 0
	for _, c := range tl.changes {
		if c.ready {
			n++
		}
	}
	return n
}

func (tl timeline) readyThroughout() bool { return tl.ready && len(tl.changes) == 0 }

// String says when the endpoint was ready, in seconds from the phase's
// start, and the share of the phase it was ready.
func (tl timeline) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ready=%v at the start", tl.ready)
	ready, since, in := tl.ready, tl.from, time.Duration(0)
	for _, c := range tl.changes {
		if ready {
			in += c.at.Sub(since)
		}
		fmt.Fprintf(&b, ", ready=%v at +%.2fs", c.ready, c.at.Sub(tl.from).Seconds())
		ready, since = c.ready, c.at
	}
	if ready {
		in += tl.to.Sub(since)
	}
	fmt.Fprintf(&b, "; ready %.1f s of %.1f s", in.Seconds(), tl.to.Sub(tl.from).Seconds())
	return b.String()
}

// routeWatch is GET /routable/{node} polled every 50 ms: each change of
// its answer.
type routeWatch struct {
	mu      sync.Mutex
	answers []routeAnswer
}

type routeAnswer struct {
	at   time.Time
	code int
	body string
}

func (r *replica) pollRoutable(t *testing.T, node string) *routeWatch {
	w := &routeWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			code, body := r.routableAnswer(ctx, node)
			if code != 0 {
				w.mu.Lock()
				if n := len(w.answers); n == 0 || w.answers[n-1].code != code || w.answers[n-1].body != body {
					w.answers = append(w.answers, routeAnswer{at: time.Now(), code: code, body: body})
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // the poll's period
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// routableAnswer is GET /routable/{node}'s status and body (0 without an
// answer); the body's load score is dropped, it changes at every read.
func (r *replica) routableAnswer(ctx context.Context, node string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/routable/"+node, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := strings.TrimSpace(string(b))
	if resp.StatusCode == http.StatusOK {
		body = "routable"
	}
	return resp.StatusCode, body
}

func (w *routeWatch) code() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.answers) == 0 {
		return 0
	}
	return w.answers[len(w.answers)-1].code
}

// since is the answers from from to to: the one in force at from, then
// each change.
func (w *routeWatch) since(from, to time.Time) routeLog {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := routeLog{from: from}
	for _, a := range w.answers {
		switch {
		case !a.at.After(from):
			l.answers = []routeAnswer{a}
		case a.at.Before(to):
			l.answers = append(l.answers, a)
		}
	}
	return l
}

// routeLog is a phase's answers, the first in force at its start.
type routeLog struct {
	from    time.Time
	answers []routeAnswer
}

// firstNot is the first time in the phase the node was not routable
// (zero: never).
func (l routeLog) firstNot() time.Time {
	for _, a := range l.answers {
		if a.code == http.StatusServiceUnavailable {
			return maxTime(a.at, l.from)
		}
	}
	return time.Time{}
}

// marks is every time in the phase the node turned not routable from
// routable (the phase's start if it was not routable then).
func (l routeLog) marks() []time.Time {
	var out []time.Time
	was := http.StatusOK
	for _, a := range l.answers {
		if a.code == http.StatusServiceUnavailable && was != http.StatusServiceUnavailable {
			out = append(out, maxTime(a.at, l.from))
		}
		was = a.code
	}
	return out
}

// first is the first time in the phase an answer's body held s.
func (l routeLog) first(s string) time.Time {
	for _, a := range l.answers {
		if strings.Contains(a.body, s) {
			return maxTime(a.at, l.from)
		}
	}
	return time.Time{}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (l routeLog) String() string {
	var b strings.Builder
	for i, a := range l.answers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q at %+.2fs", a.body, a.at.Sub(l.from).Seconds())
	}
	return b.String()
}
