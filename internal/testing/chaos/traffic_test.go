package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// callPeriod is how often each legitimate client calls: 50 clients make
// about 80 calls a second over the three replicas.
const callPeriod = 600 * time.Millisecond

// recorder keeps what the legitimate clients saw.
type recorder struct {
	mu    sync.Mutex
	calls []Call
	order *TimeOrderCheck
	stale []Staleness
	// flipped are the nodes the run takes down and up; flipReads what the
	// unary reads saw of them.
	flipped   map[string]bool
	flipReads []StreamEvent
}

func (r *recorder) flipRead(node string, down bool) {
	if !r.flipped[node] {
		return
	}
	r.mu.Lock()
	r.flipReads = append(r.flipReads, StreamEvent{At: time.Now(), Node: node, Down: down})
	r.mu.Unlock()
}

func (r *recorder) call(c Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) snapshot() ([]Call, []Staleness, []StreamEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...), append([]Staleness(nil), r.stale...), append([]StreamEvent(nil), r.flipReads...)
}

// clientAddr is legitimate client i's own loopback source address:
// 127.0.0.2 on (the flood dials from 127.0.0.1).
func clientAddr(i int) string { return fmt.Sprintf("127.0.0.%d", 2+i) }

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return connect.CodeOf(err).String()
}

// runClient is legitimate client i until ctx ends: ListNodes,
// DiagnoseNode and GET /routable/{node} in turn, each on the next
// replica.
func (w *world) runClient(ctx context.Context, i int, rec *recorder) {
	hc := &http.Client{Transport: transportFrom(clientAddr(i))}
	var cs []*client.Client
	for _, r := range w.replicas {
		c, err := client.New("http://"+r.addr, client.WithBearerToken(w.tokens[i]), client.WithHTTPClient(hc))
		if err != nil {
			panic(err) // the address is ours
		}
		cs = append(cs, c)
	}
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	tick := time.NewTicker(callPeriod)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ri := (i + k) % len(w.replicas)
		r := w.replicas[ri]
		node := w.nodes[rng.IntN(len(w.nodes))]
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		var (
			err  error
			proc string
			seen []Seen
		)
		switch k % 3 {
		case 0:
			proc = "ListNodes"
			var resp *connect.Response[llmdiagv1.ListNodesResponse]
			resp, err = cs[ri].ListNodes(cctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{
				ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"id", "last_seen", "status"}}}))
			if err == nil {
				if n := len(resp.Msg.GetNodes()); n != len(w.nodes) {
					err = fmt.Errorf("%d nodes listed, want %d", n, len(w.nodes))
				}
				for _, n := range resp.Msg.GetNodes() {
					rec.flipRead(n.GetId(), n.GetStatus() == llmdiagv1.Status_STATUS_DOWN)
					if n.GetLastSeen() != nil {
						seen = append(seen, Seen{Node: "last_seen " + n.GetId(), AsOf: n.GetLastSeen().AsTime()})
					}
				}
			}
		case 1:
			proc = "DiagnoseNode"
			var resp *connect.Response[llmdiagv1.DiagnoseNodeResponse]
			resp, err = cs[ri].DiagnoseNode(cctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node,
				ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"observed_at", "status"}}}))
			if err == nil {
				rec.flipRead(node, resp.Msg.GetDiagnosis().GetStatus() == llmdiagv1.Status_STATUS_DOWN)
			}
			if err == nil && resp.Msg.GetDiagnosis().GetObservedAt() != nil {
				seen = append(seen, Seen{Node: "observed_at " + node, AsOf: resp.Msg.GetDiagnosis().GetObservedAt().AsTime()})
			}
		default:
			proc = "routable"
			var asOf time.Time
			asOf, err = routable(cctx, hc, r.addr, w.tokens[i], node)
			if !asOf.IsZero() {
				seen = append(seen, Seen{Node: "routable " + node, AsOf: asOf})
			}
		}
		cancel()
		end := time.Now()
		if ctx.Err() != nil && err != nil {
			return // the run is over: not the service's failure
		}
		c := Call{Client: i, Replica: r.name, Proc: proc, Start: start, Latency: end.Sub(start)}
		if err != nil {
			c.Err = codeOf(err) + ": " + err.Error()
			if connect.CodeOf(err) == connect.CodeUnknown && !errors.As(err, new(*connect.Error)) {
				c.Err = err.Error()
			}
		}
		rec.call(c)
		for _, s := range seen {
			s.Client, s.Replica, s.At = i, r.name, end
			rec.order.Add(s)
		}
	}
}

// routable asks GET /routable/{node} as a health checker does: 200 or 503
// is an answer, anything else a failure. It returns the answer's
// observed_at.
func routable(ctx context.Context, hc *http.Client, addr, token, node string) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/routable/"+node, nil)
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return time.Time{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var out struct {
		ObservedAt *time.Time `json:"observed_at"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return time.Time{}, fmt.Errorf("routable answer: %w", err)
	}
	if out.ObservedAt == nil {
		return time.Time{}, nil
	}
	return *out.ObservedAt, nil
}

// observeStaleness lists every node on every replica each second until
// ctx ends, keeping each node's staleness as answered.
func (w *world) observeStaleness(ctx context.Context, rec *recorder) {
	hc := &http.Client{Transport: transportFrom("127.0.1.2")}
	var cs []*client.Client
	for _, r := range w.replicas {
		c, _ := client.New("http://"+r.addr, client.WithBearerToken(w.adminToken), client.WithHTTPClient(hc))
		cs = append(cs, c)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, c := range cs {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := c.ListNodes(cctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{
				ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"id", "staleness"}}}))
			cancel()
			if err != nil {
				continue // the clients count failures; this only reads ages
			}
			now := time.Now()
			rec.mu.Lock()
			for _, n := range resp.Msg.GetNodes() {
				if n.GetStaleness() != nil {
					rec.stale = append(rec.stale, Staleness{Node: n.GetId(), At: now, Age: n.GetStaleness().AsDuration()})
				}
			}
			rec.mu.Unlock()
		}
	}
}

// watcher is one client.Watch stream and the states it delivered for the
// nodes the run flips.
type watcher struct {
	id      int
	replica string
	view    *client.View
	mu      sync.Mutex
	events  []StreamEvent
}

func (wt *watcher) snapshot() []StreamEvent {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return append([]StreamEvent(nil), wt.events...)
}

// startWatchers opens perReplica Watch streams on every replica, each
// from its own address with a legitimate client's token.
func (w *world) startWatchers(ctx context.Context, perReplica int, flips map[string]bool) []*watcher {
	var out []*watcher
	for ri, r := range w.replicas {
		for j := range perReplica {
			id := ri*perReplica + j
			wt := &watcher{id: id, replica: r.name}
			hc := &http.Client{Transport: transportFrom(fmt.Sprintf("127.0.2.%d", 1+id))}
			c, _ := client.New("http://"+r.addr, client.WithBearerToken(w.tokens[id]), client.WithHTTPClient(hc))
			wt.view = c.Watch(ctx, client.Selector{Heartbeat: 5 * time.Second},
				client.WithBackoff(100*time.Millisecond, 2*time.Second),
				client.WithEventHook(func(ev *llmdiagv1.StreamHealthResponse) {
					h := ev.GetHealth()
					if h == nil || !flips[h.GetNode()] {
						return
					}
					wt.mu.Lock()
					wt.events = append(wt.events, StreamEvent{At: time.Now(), Node: h.GetNode(), Down: h.GetStatus() == llmdiagv1.Status_STATUS_DOWN})
					wt.mu.Unlock()
				}))
			out = append(out, wt)
		}
	}
	return out
}

// flood holds idle TCP connections from 127.0.0.1 to the replicas.
type flood struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed atomic.Int64 // by the server
	failed int          // dials refused
}

// startFlood opens perReplica idle connections to each address from
// 127.0.0.1, and counts those the server closes.
func startFlood(addrs []string, perReplica int) *flood {
	f := &flood{}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: 2 * time.Second}
	for _, a := range addrs {
		for range perReplica {
			c, err := d.Dial("tcp", a)
			if err != nil {
				f.failed++
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			go func() {
				var b [1]byte
				if _, err := c.Read(b[:]); err != nil && !errors.Is(err, net.ErrClosed) {
					f.closed.Add(1)
				}
			}()
		}
	}
	return f
}

func (f *flood) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// slowReader opens a StreamHealth stream on addr, reads its first message
// and then nothing until ctx ends; a stream that breaks before its first
// message (its replica killed) is opened again, at most every second.
// It returns how many streams it opened.
func (w *world) slowReader(ctx context.Context, addr string) int {
	hc := &http.Client{Transport: transportFrom("127.0.3.1")}
	c, err := client.New("http://"+addr, client.WithBearerToken(w.tokens[clientCount-1]), client.WithHTTPClient(hc))
	if err != nil {
		panic(err) // the address is ours
	}
	opened := 0
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for ctx.Err() == nil {
		opened++
		s, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
		if err == nil && s.Receive() {
			<-ctx.Done()
			s.Close()
			break
		}
		if err == nil {
			s.Close()
		}
		select {
		case <-ctx.Done():
		case <-retry.C:
		}
	}
	return opened
}
