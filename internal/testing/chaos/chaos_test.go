package chaos

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

var full = flag.Bool("chaos.full", false, "run the whole chaos run (a few minutes): three replicas, Redis, Prometheus, 205 simulated nodes, every injection")

// Run lengths.
const (
	baseline   = 40 * time.Second // quiet, before any injection
	eachPhase  = 20 * time.Second // one injection
	together   = 40 * time.Second // every injection at once
	flipEvery  = 15 * time.Second // a flip node goes down this often
	flipDown   = 10 * time.Second // and stays down this long
	flipSettle = 12 * time.Second // a stream has this long after a flip to deliver it
	settleFor  = 2 * time.Minute  // at most, for resources to settle at the end
	floodConns = 1100             // per replica: past --max-connections (1000), were it not for --max-pending-conns-per-ip
	watchersOn = 2                // Watch streams per replica
	hangShare  = 10               // percent of the 200 targets hung
	// usageSamples: resources are read this many times a second apart at
	// the end of the baseline and at the end, and each figure's lowest
	// compared (FloorUsage).
	usageSamples = 10
)

// phase is a named stretch of the run.
type phase struct {
	name     string
	from, to time.Time
}

// run is one chaos run's state.
type run struct {
	t        *testing.T
	w        *world
	rec      *recorder
	mu       sync.Mutex
	phases   []phase
	windows  []Window
	flips    []Flip
	failover []time.Duration
	notes    []string
	excused  []excuse // nodes stale on purpose
	// baseRefresh is the leader's mean refresh time up to the end of the
	// baseline.
	baseRefresh time.Duration
}

type excuse struct {
	nodes    map[string]bool
	from, to time.Time
}

func (r *run) note(format string, args ...any) {
	s := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	r.t.Log(s)
	r.mu.Lock()
	r.notes = append(r.notes, s)
	r.mu.Unlock()
}

func (r *run) phase(name string, f func()) {
	from := time.Now()
	r.t.Logf("%s phase %s", from.Format("15:04:05.000"), name)
	f()
	r.mu.Lock()
	r.phases = append(r.phases, phase{name, from, time.Now()})
	r.mu.Unlock()
}

// hold waits out the rest of a phase that began at from: the clients'
// traffic is what is measured meanwhile.
func hold(ctx context.Context, from time.Time, d time.Duration) {
	t := time.NewTimer(time.Until(from.Add(d)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func TestChaos(t *testing.T) {
	if !*full {
		t.Skip("the chaos run takes minutes: go test ./internal/testing/chaos -run TestChaos -chaos.full -v -timeout 20m (make chaos)")
	}
	began := time.Now()
	w := newWorld(t)
	t.Logf("world up in %v: %d nodes, %d replicas", time.Since(began).Round(time.Second), len(w.nodes), len(w.replicas))
	r := &run{t: t, w: w, rec: &recorder{order: NewTimeOrderCheck(replicaLag), flipped: map[string]bool{}}}

	// Flip nodes: directly scraped, never hung; their downs are the changes
	// every stream must deliver.
	flipNodes := []string{"n-150", "n-151", "n-152", "n-153"}
	flipSet := r.rec.flipped
	for _, n := range flipNodes {
		flipSet[n] = true
	}
	var hung []int // extra node indexes hung: a tenth, half read through Prometheus
	for i := 0; len(hung) < extraNodes*hangShare/100; i += 10 {
		hung = append(hung, i+3, i+105) // n-003, n-105, n-013, n-115, …
	}
	hungSet := map[string]bool{}
	for _, i := range hung {
		hungSet[w.proxies[i].id] = true
	}

	ctx, stopTraffic := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopTraffic(); wg.Wait() }()
	watchers := w.startWatchers(ctx, watchersOn, flipSet)
	for _, wt := range watchers {
		testkit.Eventually(t, 60*time.Second, fmt.Sprintf("watcher %d synced", wt.id), func() bool { return wt.view.Status().Synced })
	}
	for i := range clientCount {
		wg.Go(func() { w.runClient(ctx, i, r.rec) })
	}
	wg.Go(func() { w.observeStaleness(ctx, r.rec) })
	flipCtx, stopFlips := context.WithCancel(ctx)
	flipDone := make(chan struct{})
	go func() { defer close(flipDone); r.flipLoop(flipCtx, flipNodes) }()

	// Baseline, and the resources at its end.
	start := map[string]Usage{}
	r.phase("baseline", func() {
		from := time.Now()
		hold(ctx, from, baseline-usageSamples*time.Second)
		samples := map[string][]Usage{}
		for range usageSamples {
			if us, ok := roleUsage(w); ok {
				for role, u := range us {
					samples[role] = append(samples[role], u)
				}
			}
			hold(ctx, time.Now(), time.Second)
		}
		for role, us := range samples {
			start[role] = Settled(us)
		}
		if _, ok := start[roleHasLed]; !ok {
			start[roleHasLed] = start[roleLeader]
		}
		if l := w.leader(); l != nil {
			if m, err := scrapeMetrics(l, "llmdiag_refresh_duration_seconds_sum", "llmdiag_refresh_duration_seconds_count"); err == nil && m["llmdiag_refresh_duration_seconds_count"] > 0 {
				r.baseRefresh = time.Duration(m["llmdiag_refresh_duration_seconds_sum"] / m["llmdiag_refresh_duration_seconds_count"] * float64(time.Second))
			}
		}
	})

	r.phase("leader killed", func() { r.killLeader(ctx, eachPhase) })
	r.phase("redis restarted", func() { r.restartRedis(ctx, eachPhase) })
	r.phase("prometheus paused", func() { r.pausePrometheus(ctx, eachPhase) })
	r.phase("10% of targets hang", func() { r.hang(ctx, hung, hungSet, eachPhase) })
	r.phase("tokens file changed", func() { r.rotateTokens(ctx, eachPhase) })
	r.phase("connection flood", func() { r.flood(ctx, eachPhase) })
	r.phase("slow stream reader", func() { r.slowReader(ctx, eachPhase) })
	r.phase("all together", func() {
		from := time.Now()
		var pw sync.WaitGroup
		pw.Go(func() { r.killLeader(ctx, together) })
		pw.Go(func() { r.restartRedisAfter(ctx, 5*time.Second, together) })
		pw.Go(func() { r.pausePrometheus(ctx, together/2) })
		pw.Go(func() { r.hang(ctx, hung, hungSet, together) })
		pw.Go(func() { r.rotateTokens(ctx, together) })
		pw.Go(func() { r.flood(ctx, together) })
		pw.Go(func() { r.slowReader(ctx, together) })
		pw.Wait()
		hold(ctx, from, together)
	})
	stopFlips()
	<-flipDone

	// Settle: the last flip delivered, then resources back near the start.
	var end map[string]Usage
	r.phase("settle", func() {
		hold(ctx, time.Now(), flipSettle)
		last := map[string][]Usage{}
		settled := func() bool {
			us, ok := roleUsage(w)
			if !ok {
				return false
			}
			now := map[string]Usage{}
			for role, u := range us {
				last[role] = append(last[role], u)
				if n := len(last[role]); n > usageSamples {
					last[role] = last[role][n-usageSamples:]
				}
				if len(last[role]) == usageSamples {
					now[role] = Settled(last[role])
				}
			}
			if len(now) != len(us) {
				return false // a role not yet read often enough
			}
			end = now
			return len(Grown(start, end, 0.10)) == 0
		}
		deadline := time.Now().Add(settleFor)
		for !settled() && time.Now().Before(deadline) {
			hold(ctx, time.Now(), time.Second)
		}
	})
	streamsEnd := time.Now()
	statuses := map[int]string{}
	var notResumed []string
	for _, wt := range watchers {
		st := wt.view.Status()
		statuses[wt.id] = fmt.Sprintf("%d reconnects", st.Reconnects)
		if !st.Connected || !st.Synced || st.Age > 3*5*time.Second {
			notResumed = append(notResumed, fmt.Sprintf("watcher %d on %s: connected %v synced %v last event %v ago (%v)", wt.id, wt.replica, st.Connected, st.Synced, st.Age.Round(time.Millisecond), st.LastError))
		}
	}
	stopTraffic()
	wg.Wait()

	tb := r.table(start, end, watchers, notResumed, streamsEnd)
	tb.Report("run time", time.Since(began).Round(time.Second).String())
	md := tb.Markdown()
	t.Logf("chaos run, %d nodes, %d replicas, %d clients:\n%s", len(w.nodes), len(w.replicas), clientCount, md)
	fmt.Println(md)
	if out := os.Getenv("CHAOS_TABLE"); out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, n := range r.notes {
		t.Log(n)
	}
	for _, f := range tb.Failures() {
		t.Errorf("%s: %s (bound %s)", f.Figure, f.Value, f.Bound)
	}
}

// Roles replicas are compared by: the lease holder refreshes (its
// scrapes, its queries) and a follower does not; a follower that has held
// the lease since it started keeps what it scraped then (samples bounded
// by --window and --retention), so it is held to the leader's start.
const (
	roleLeader = "leader"
	roleNever  = "follower"
	roleHasLed = "follower that has led"
)

// roleUsage reads every replica's resources, keyed by its role, the
// highest of a role's replicas; ok is false unless every replica was read
// and exactly one leads.
func roleUsage(w *world) (map[string]Usage, bool) {
	out := map[string]Usage{}
	leaders, read := 0, 0
	for _, rp := range w.replicas {
		m, err := scrapeMetrics(rp, "llmdiag_lease_is_leader", "llmdiag_lease_acquisitions_total")
		if err != nil {
			continue
		}
		u, err := usage(rp)
		if err != nil {
			continue
		}
		read++
		role := roleNever
		switch {
		case m["llmdiag_lease_is_leader"] == 1:
			role = roleLeader
			leaders++
		case m["llmdiag_lease_acquisitions_total"] > 0:
			role = roleHasLed
		}
		prev, seen := out[role]
		if !seen {
			prev = u
		}
		out[role] = Usage{Goroutines: max(prev.Goroutines, u.Goroutines), HeapGoalBytes: max(prev.HeapGoalBytes, u.HeapGoalBytes), RSSBytes: max(prev.RSSBytes, u.RSSBytes)}
	}
	return out, leaders == 1 && read == len(w.replicas)
}

// flipLoop takes the flip nodes down and up in turn until ctx ends.
func (r *run) flipLoop(ctx context.Context, nodes []string) {
	tick := time.NewTicker(flipEvery)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n := nodes[k%len(nodes)]
		if err := r.w.extra.SetDown(n, true); err != nil {
			r.t.Error(err)
			return
		}
		down := time.Now()
		hold(context.Background(), down, flipDown) // a flip started is finished
		if err := r.w.extra.SetDown(n, false); err != nil {
			r.t.Error(err)
			return
		}
		r.mu.Lock()
		r.flips = append(r.flips, Flip{Node: n, Down: down, Up: time.Now()})
		r.excused = append(r.excused, excuse{nodes: map[string]bool{n: true}, from: down, to: time.Now().Add(flipSettle)})
		r.mu.Unlock()
	}
}

// killLeader SIGKILLs the lease holder, waits for another to take the
// lease, restarts the killed one and waits until it serves again; calls to
// it in between are in a documented window. It then holds until d is up.
func (r *run) killLeader(ctx context.Context, d time.Duration) {
	from := time.Now()
	var leader *replica
	testkit.Eventually(r.t, 60*time.Second, "one leader", func() bool { leader = r.w.leader(); return leader != nil })
	killed := time.Now()
	leader.kill()
	var next *replica
	testkit.Wait{For: 60 * time.Second, Every: 20 * time.Millisecond}.Until(r.t, "another replica takes the lease", func() bool {
		next = r.w.leader()
		return next != nil && next != leader
	})
	failover := time.Since(killed)
	leader.start(r.t)
	r.w.waitServing(leader, 2*time.Minute)
	back := time.Now()
	r.mu.Lock()
	r.failover = append(r.failover, failover)
	r.windows = append(r.windows, Window{Name: "killed replica down", Replica: leader.name, From: killed, To: back})
	r.mu.Unlock()
	r.note("leader %s killed: %s took the lease after %v; %s serving again after %v", leader.name, next.name, failover.Round(time.Millisecond), leader.name, back.Sub(killed).Round(time.Millisecond))
	hold(ctx, from, d)
}

func (r *run) restartRedis(ctx context.Context, d time.Duration) { r.restartRedisAfter(ctx, 0, d) }

// restartRedisAfter restarts Redis (empty: no persistence) after wait and
// waits until a replica holds the lease again.
func (r *run) restartRedisAfter(ctx context.Context, wait, d time.Duration) {
	from := time.Now()
	hold(ctx, from, wait)
	at := time.Now()
	r.w.redis.Restart()
	testkit.Wait{For: 60 * time.Second, Every: 20 * time.Millisecond}.Until(r.t, "a leader after Redis restarted", func() bool { return r.w.leader() != nil })
	r.note("redis restarted: a leader again after %v", (time.Since(at)).Round(time.Millisecond))
	hold(ctx, from, d)
}

// pausePrometheus stops Prometheus with SIGSTOP for d, then resumes it.
func (r *run) pausePrometheus(ctx context.Context, d time.Duration) {
	from := time.Now()
	pid := r.w.prom.Pid()
	if pid == 0 {
		r.t.Error("prometheus is not running")
		return
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		r.t.Error(err)
		return
	}
	prom := map[string]bool{}
	for i := range viaPrometheus {
		prom[r.w.proxies[i].id] = true
	}
	hold(ctx, from, d)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		r.t.Error(err)
	}
	r.mu.Lock()
	r.excused = append(r.excused, excuse{nodes: prom, from: from, to: time.Now().Add(3 * interval)})
	r.mu.Unlock()
	r.note("prometheus paused %v", time.Since(from).Round(time.Millisecond))
}

// hang makes the hung targets hang for d.
func (r *run) hang(ctx context.Context, hung []int, set map[string]bool, d time.Duration) {
	from := time.Now()
	for _, i := range hung {
		r.w.proxies[i].hang.Store(true)
	}
	hold(ctx, from, d)
	for _, i := range hung {
		r.w.proxies[i].hang.Store(false)
	}
	r.mu.Lock()
	r.excused = append(r.excused, excuse{nodes: set, from: from, to: time.Now().Add(3 * interval)})
	r.mu.Unlock()
}

// rotateTokens adds a token and replaces the spare one (no legitimate
// client uses either), then waits until every replica takes the new ones
// and refuses the old spare.
func (r *run) rotateTokens(ctx context.Context, d time.Duration) {
	from := time.Now()
	added, rotated := randomToken("added"), randomToken("spare")
	old := r.w.spareToken
	r.w.tokensMu.Lock()
	for i, e := range r.w.extraTok {
		if e.name == "spare" {
			r.w.extraTok[i].token = rotated
		}
	}
	r.w.extraTok = append(r.w.extraTok, tokenEntry{fmt.Sprintf("added-%d", len(r.w.extraTok)), "reader", added})
	r.w.spareToken = rotated
	r.w.tokensMu.Unlock()
	r.w.writeTokens()
	took := testkit.Wait{For: 60 * time.Second, Every: 50 * time.Millisecond}.Until(r.t, "every replica takes the new tokens and refuses the old", func() bool {
		for _, rp := range r.w.replicas {
			if bearerList(rp.addr, added) != http.StatusOK || bearerList(rp.addr, rotated) != http.StatusOK || bearerList(rp.addr, old) != http.StatusUnauthorized {
				return false
			}
		}
		return true
	})
	r.note("tokens file changed: every replica took it within %v", took.Round(time.Millisecond))
	hold(ctx, from, d)
}

// flood holds floodConns idle connections from 127.0.0.1 on every replica
// for d.
func (r *run) flood(ctx context.Context, d time.Duration) {
	from := time.Now()
	var addrs []string
	for _, rp := range r.w.replicas {
		addrs = append(addrs, rp.addr)
	}
	f := startFlood(addrs, floodConns)
	hold(ctx, from, d)
	f.mu.Lock()
	opened := len(f.conns)
	f.mu.Unlock()
	f.stop()
	r.note("flood: %d connections opened from 127.0.0.1 (%d dials refused), %d closed by the replicas", opened, f.failed, f.closed.Load())
}

// slowReader holds a StreamHealth stream that stops reading, on the first
// replica, for d.
func (r *run) slowReader(ctx context.Context, d time.Duration) {
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if n := r.w.slowReader(sctx, r.w.replicas[0].addr); n > 1 {
		r.note("slow reader on %s: %d streams opened (the first broke before its first message)", r.w.replicas[0].name, n)
	}
}

// table judges the run.
func (r *run) table(start, end map[string]Usage, watchers []*watcher, notResumed []string, streamsEnd time.Time) *Table {
	calls, stale, flipReads := r.rec.snapshot()
	var tb Table
	cs := ClassifyCalls(calls, r.windows)
	tb.Report("legitimate calls made", fmt.Sprint(cs.Made))
	tb.Report("failed in a documented window (calls to a killed replica until it serves again)", fmt.Sprint(cs.FailedInWindow))
	var ex []string
	for i, c := range cs.Outside {
		if i == 5 {
			ex = append(ex, fmt.Sprintf("… %d more", len(cs.Outside)-5))
			break
		}
		ex = append(ex, fmt.Sprintf("%s %s on %s: %s", c.Start.Format("15:04:05.000"), c.Proc, c.Replica, c.Err))
	}
	tb.Check("failed outside the windows", fmt.Sprint(len(cs.Outside)), "0", len(cs.Outside) == 0)
	for _, e := range ex {
		r.t.Logf("failed outside the windows: %s", e)
	}
	for _, g := range groupFailures(cs.Outside) {
		r.t.Logf("failed outside the windows, grouped: %s", g)
	}

	var base time.Duration
	for _, p := range r.phases {
		if p.name == "settle" {
			continue
		}
		p99, ok := Quantile(calls, 0.99, func(c Call) bool { return !c.Start.Before(p.from) && c.Start.Before(p.to) })
		if !ok {
			continue
		}
		if p.name == "baseline" {
			base = p99
		}
		worst := func(prom bool) string {
			s, _ := MaxStaleness(stale, func(node string, at time.Time) bool {
				return at.Before(p.from) || !at.Before(p.to) || r.isExcused(node, at) || r.w.viaPrometheus[node] != prom
			})
			return fmt.Sprintf("%v (%s)", s.Age.Round(100*time.Millisecond), s.Node)
		}
		ratio := ""
		if base > 0 {
			ratio = fmt.Sprintf(" (%.1f×)", float64(p99)/float64(base))
		}
		tb.Report("p99 latency / longest staleness of a scraped node / of a Prometheus-only node: "+p.name,
			fmt.Sprintf("%v%s / %s / %s", p99.Round(100*time.Microsecond), ratio, worst(false), worst(true)))
	}
	tb.Report("the leader's mean refresh time until the end of the baseline", fmt.Sprintf("%v (--interval %v)", r.baseRefresh.Round(time.Millisecond), interval))
	worst, _ := MaxStaleness(stale, nil)
	tb.Report("longest staleness of any node, faults included", fmt.Sprintf("%v (%s)", worst.Age.Round(time.Millisecond), worst.Node))

	var fo []string
	ok := true
	for _, d := range r.failover {
		fo = append(fo, d.Round(time.Millisecond).String())
		ok = ok && d <= 2*leaseTTL+interval
	}
	tb.Check("failover after SIGKILL of the leader", strings.Join(fo, ", "), fmt.Sprintf("≤ %v (two lease periods and a refresh)", 2*leaseTTL+interval), ok && len(fo) > 0)

	o := r.rec.order.Result()
	tb.Report("verdict reads checked for time order", fmt.Sprint(o.Reads))
	tb.Check("verdicts back in time on one replica", fmt.Sprint(len(o.SameReplica)), "0", len(o.SameReplica) == 0)
	tb.Check("verdicts behind across replicas beyond the documented lag", fmt.Sprint(len(o.BeyondLag)), fmt.Sprintf("0 (lag %v)", replicaLag), len(o.BeyondLag) == 0)
	tb.Report("reads behind another replica within the lag (largest)", fmt.Sprintf("%d (%v)", o.Lagging, o.MaxLag.Round(time.Millisecond)))
	for i, g := range append(o.SameReplica, o.BeyondLag...) {
		if i == 5 {
			break
		}
		r.t.Logf("back in time: %v", g)
	}

	streams := map[int][]StreamEvent{}
	reconnects := 0
	for _, wt := range watchers {
		streams[wt.id] = wt.snapshot()
		reconnects += wt.view.Status().Reconnects
	}
	published := func(f Flip) bool { return Published(flipReads, f, flipSettle) }
	seen := 0
	for _, f := range r.flips {
		if published(f) {
			seen++
		}
	}
	missed := MissedChanges(streams, r.flips, published, flipSettle, streamsEnd)
	tb.Report("streams / injected changes (of which unary reads saw) / stream reconnects", fmt.Sprintf("%d / %d (%d) / %d", len(watchers), len(r.flips), seen, reconnects))
	tb.Check("stream changes missed", fmt.Sprint(len(missed)), "0", len(missed) == 0)
	for i, m := range missed {
		if i == 5 {
			break
		}
		r.t.Logf("missed: stream %d, %s %s (down %s, up %s)", m.Stream, m.Flip.Node, m.What, m.Flip.Down.Format("15:04:05.000"), m.Flip.Up.Format("15:04:05.000"))
	}
	tb.Check("streams not resumed at the end", fmt.Sprint(len(notResumed)), "0", len(notResumed) == 0)
	for _, s := range notResumed {
		r.t.Log(s)
	}

	grown := Grown(start, end, 0.10)
	names := make([]string, 0, len(start))
	for n := range start {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s, e := start[n], end[n]
		if _, ok := end[n]; !ok {
			tb.Report("resources of the "+n+", start → end (goroutines, heap goal, RSS)", "no such replica at the end")
			continue
		}
		tb.Report("resources of the "+n+", start → end (goroutines, heap goal, RSS)", fmt.Sprintf("%.0f → %.0f, %.1f → %.1f MiB, %.1f → %.1f MiB",
			s.Goroutines, e.Goroutines, s.HeapGoalBytes/(1<<20), e.HeapGoalBytes/(1<<20), s.RSSBytes/(1<<20), e.RSSBytes/(1<<20)))
	}
	var gs []string
	for _, g := range grown {
		gs = append(gs, fmt.Sprintf("%s %s %.0f → %.0f", g.Replica, g.Figure, g.Start, g.End))
	}
	_, read := end[roleLeader]
	tb.Check("goroutines or heap goal more than 10% above the start after settling", fmt.Sprint(len(grown)), "0 (and the leader read at the end)", len(grown) == 0 && read)
	for _, g := range gs {
		r.t.Log("grown: " + g)
	}
	return &tb
}

// quoted is a quoted string in an error (a node id), left out when
// failures are grouped.
var quoted = regexp.MustCompile(`"[^"]*"`)

// groupFailures summarises failures by replica, procedure and error:
// how many, first and last.
func groupFailures(calls []Call) []string {
	type group struct {
		n           int
		first, last time.Time
	}
	groups := map[string]*group{}
	var keys []string
	for _, c := range calls {
		e := quoted.ReplaceAllString(c.Err, `"…"`)
		if len(e) > 100 {
			e = e[:100]
		}
		k := c.Replica + " " + c.Proc + ": " + e
		g := groups[k]
		if g == nil {
			g = &group{first: c.Start}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		g.last = c.Start
	}
	var out []string
	for _, k := range keys {
		g := groups[k]
		out = append(out, fmt.Sprintf("%d× %s (%s – %s)", g.n, k, g.first.Format("15:04:05.000"), g.last.Format("15:04:05.000")))
	}
	return out
}

func (r *run) isExcused(node string, at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.excused {
		if e.nodes[node] && !at.Before(e.from) && !at.After(e.to) {
			return true
		}
	}
	return false
}
