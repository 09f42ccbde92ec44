package server_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// streamFleet is the fleet the stream tests select from.
var streamFleet = []struct {
	id, model string
	labels    map[string]string
}{
	{"a-0", "alpha", map[string]string{"pool": "batch", "zone": "x"}},
	{"a-1", "alpha", map[string]string{"pool": "online", "zone": "x"}},
	{"b-0", "beta", map[string]string{"pool": "batch", "zone": "y"}},
	{"b-1", "beta", nil},
}

// streamServer serves a memory store holding streamFleet.
func streamServer(t testing.TB) (string, *memory.Store) {
	t.Helper()
	return streamServerWith(t, nil)
}

// servedLimits are the limits serve puts in front of the service with its
// default flags and no authentication: every cap on, principals named by
// the remote host.
func servedLimits() *server.Limits {
	return &server.Limits{Principal: server.PrincipalOr(server.RemoteHost)}
}

// streamServerWith is streamServer behind limits (nil: none).
func streamServerWith(t testing.TB, limits *server.Limits) (string, *memory.Store) {
	t.Helper()
	st := memory.New(memory.Options{FeedLen: 1 << 16}, "s")
	now := time.Now()
	for _, n := range streamFleet {
		rec := &store.Record{
			Node:    &llmdiagv1.Node{Id: n.id, Model: n.model, Status: llmdiagv1.Status_STATUS_OK, Routable: true, Labels: n.labels, LastSeen: timestamppb.New(now)},
			Metrics: &llmdiagv1.NodeMetrics{Node: n.id, Model: n.model, ObservedAt: timestamppb.New(now), Up: true},
		}
		if err := st.Put(context.Background(), rec, diagnose.Point{At: now}); err != nil {
			t.Fatal(err)
		}
	}
	srv := servertest.Start(t, servertest.Options{Store: st, Config: server.Config{StaleAfter: time.Hour, MinHeartbeat: time.Second}, Limits: limits})
	return srv.URL, st
}

func change(node, model string, labels map[string]string, status llmdiagv1.Status, score float64) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{Node: node, Model: model, Labels: labels, Status: status, Routable: true, LoadScore: score, ObservedAt: timestamppb.Now()}
}

// streamRecv opens a stream and returns a receive function.
func streamRecv(t *testing.T, ctx context.Context, c *client.Client, r *llmdiagv1.StreamHealthRequest) func() *llmdiagv1.StreamHealthResponse {
	t.Helper()
	s, err := c.StreamHealth(ctx, connect.NewRequest(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return func() *llmdiagv1.StreamHealthResponse {
		t.Helper()
		if !s.Receive() {
			t.Fatalf("stream ended: %v", s.Err())
		}
		return s.Msg()
	}
}

func TestStreamSelectors(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: nine streams each waiting out a 1 s heartbeat")
	}
	url, st := streamServer(t)
	c, err := client.New(url, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *llmdiagv1.StreamHealthRequest
		want string // selected nodes, initial and changed
	}{
		{"all", &llmdiagv1.StreamHealthRequest{}, "a-0,a-1,b-0,b-1"},
		{"node ids", &llmdiagv1.StreamHealthRequest{Nodes: []string{"b-1", "a-0", "ghost"}}, "a-0,b-1"},
		{"model", &llmdiagv1.StreamHealthRequest{Model: "beta"}, "b-0,b-1"},
		{"one label", &llmdiagv1.StreamHealthRequest{Labels: map[string]string{"pool": "batch"}}, "a-0,b-0"},
		{"every label must match", &llmdiagv1.StreamHealthRequest{Labels: map[string]string{"pool": "batch", "zone": "x"}}, "a-0"},
		{"an empty label value is not a missing label", &llmdiagv1.StreamHealthRequest{Labels: map[string]string{"pool": ""}}, ""},
		{"model and label", &llmdiagv1.StreamHealthRequest{Model: "alpha", Labels: map[string]string{"zone": "x"}}, "a-0,a-1"},
		{"ids and model", &llmdiagv1.StreamHealthRequest{Nodes: []string{"a-0", "b-0"}, Model: "beta"}, "b-0"},
		{"nothing", &llmdiagv1.StreamHealthRequest{Model: "gamma"}, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tc.req.HeartbeatInterval = durationpb.New(time.Second)
			recv := streamRecv(t, ctx, c, tc.req)
			var initial []string
			for m := recv(); m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED; m = recv() {
				if m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_INITIAL || m.GetResumeToken() != "" {
					t.Fatalf("before SYNCED: %v", m)
				}
				initial = append(initial, m.GetHealth().GetNode())
			}
			if got := strings.Join(initial, ","); got != tc.want {
				t.Fatalf("initial %q, want %q", got, tc.want)
			}
			// Every node changes: the stream sees exactly the selected
			// nodes' changes, in order.
			status := llmdiagv1.Status(2 + i%2)
			for _, n := range streamFleet {
				if _, err := st.Publish(ctx, change(n.id, n.model, n.labels, status, 0)); err != nil {
					t.Fatal(err)
				}
			}
			var changed []string
			for len(changed) < len(initial) {
				m := recv()
				if m.GetKind() == llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
					continue
				}
				if m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_CHANGE || m.GetHealth().GetStatus() != status || m.GetResumeToken() == "" {
					t.Fatalf("want a change to %v, got %v", status, m)
				}
				changed = append(changed, m.GetHealth().GetNode())
			}
			if got := strings.Join(changed, ","); got != tc.want {
				t.Fatalf("changes %q, want %q", got, tc.want)
			}
			// Nothing else: the next message is a heartbeat.
			if m := recv(); m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
				t.Fatalf("want a heartbeat, got %v", m)
			}
		})
	}
}

func TestStreamBadInput(t *testing.T) {
	url, _ := streamServer(t)
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		req   *llmdiagv1.StreamHealthRequest
		field string
	}{
		{"min score above 1", &llmdiagv1.StreamHealthRequest{MinScoreChange: 1.5}, "min_score_change"},
		{"min score negative", &llmdiagv1.StreamHealthRequest{MinScoreChange: -0.1}, "min_score_change"},
		{"min score NaN", &llmdiagv1.StreamHealthRequest{MinScoreChange: math.NaN()}, "min_score_change"},
		{"empty label key", &llmdiagv1.StreamHealthRequest{Labels: map[string]string{"": "x"}}, "labels"},
		{"huge label value", &llmdiagv1.StreamHealthRequest{Labels: map[string]string{"k": strings.Repeat("v", 2000)}}, `labels["k"]`},
		{"bad node id", &llmdiagv1.StreamHealthRequest{Nodes: []string{"a-0", "no spaces"}}, "nodes[1]"},
		{"heartbeat too long", &llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(time.Hour)}, "heartbeat_interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := c.StreamHealth(ctx, connect.NewRequest(tc.req))
			if err == nil {
				s.Receive()
				err = s.Err()
				s.Close()
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want invalid_argument naming %s", err, tc.field)
			}
		})
	}
}

// min_score_change per subscriber: a score-only move reaches the subscriber
// asking 0.3 only once it adds up to 0.3 from what it was last sent.
func TestStreamMinScoreChange(t *testing.T) {
	url, st := streamServer(t)
	c, _ := client.New(url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fine := streamRecv(t, ctx, c, &llmdiagv1.StreamHealthRequest{Nodes: []string{"a-0"}})
	coarse := streamRecv(t, ctx, c, &llmdiagv1.StreamHealthRequest{Nodes: []string{"a-0"}, MinScoreChange: 0.3})
	for _, recv := range []func() *llmdiagv1.StreamHealthResponse{fine, coarse} {
		for recv().GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED {
		}
	}
	ok := llmdiagv1.Status_STATUS_OK
	for _, h := range []*llmdiagv1.NodeHealth{
		change("a-0", "alpha", nil, ok, 0.1),
		change("a-0", "alpha", nil, ok, 0.2),
		change("a-0", "alpha", nil, ok, 0.3), // 0.3 from the initial 0: coarse gets it
		change("a-0", "alpha", nil, ok, 0.4),
		change("a-0", "alpha", nil, llmdiagv1.Status_STATUS_WARN, 0.4), // status: both
	} {
		if _, err := st.Publish(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	read := func(recv func() *llmdiagv1.StreamHealthResponse, n int) string {
		var got []string
		for len(got) < n {
			if m := recv(); m.GetKind() == llmdiagv1.EventKind_EVENT_KIND_CHANGE {
				got = append(got, fmt.Sprintf("%.1f/%v", m.GetHealth().GetLoadScore(), m.GetHealth().GetStatus()))
			}
		}
		return strings.Join(got, " ")
	}
	if got := read(fine, 5); got != "0.1/STATUS_OK 0.2/STATUS_OK 0.3/STATUS_OK 0.4/STATUS_OK 0.4/STATUS_WARN" {
		t.Errorf("min 0: %s", got)
	}
	if got := read(coarse, 2); got != "0.3/STATUS_OK 0.4/STATUS_WARN" {
		t.Errorf("min 0.3: %s", got)
	}
}

// A client that drops the stream mid-way and resumes with the last token it
// received misses no change and sees none twice, over real streams.
func TestStreamResumeAfterDisconnect(t *testing.T) {
	url, st := streamServer(t)
	c, _ := client.New(url, client.WithProtocol(client.ProtocolGRPC))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const changes = 300
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range changes {
			n := streamFleet[i%len(streamFleet)]
			if _, err := st.Publish(ctx, change(n.id, n.model, n.labels, llmdiagv1.Status(1+i%4), float64(i+1)/1000)); err != nil {
				t.Error(err)
				return
			}
			if i%7 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	last := map[string]float64{}
	token := ""
	for conn := 0; ; conn++ {
		sctx, scancel := context.WithCancel(ctx)
		s, err := c.StreamHealth(sctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{ResumeToken: token, HeartbeatInterval: durationpb.New(time.Second)}))
		if err != nil {
			t.Fatal(err)
		}
		budget := 15 + conn*3 // messages before this connection drops
		for s.Receive() {
			m := s.Msg()
			switch m.GetKind() {
			case llmdiagv1.EventKind_EVENT_KIND_INITIAL:
				if conn > 0 {
					t.Fatalf("connection %d resynced from token %q", conn, token)
				}
			case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
				n, sc := m.GetHealth().GetNode(), m.GetHealth().GetLoadScore()
				if prev, ok := last[n]; ok && sc <= prev {
					t.Fatalf("connection %d: %s at %v again after %v", conn, n, sc, prev)
				}
				last[n] = sc
			}
			token = m.GetResumeToken()
			if budget--; budget == 0 || m.GetKind() == llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
				break
			}
		}
		scancel()
		s.Close()
		select {
		case <-published:
		default:
			continue
		}
		done := true
		for i, n := range streamFleet {
			if last[n.id] != float64(changes-len(streamFleet)+i+1)/1000 {
				done = false
			}
		}
		if done {
			return
		}
		if conn > 500 {
			t.Fatalf("never caught up: %v", last)
		}
	}
}

// TestStreamBacklogFlushedTogether: a stream whose subscriber is behind the
// feed writes its backlog with a flush for many messages, not one each, and
// still delivers every node's latest state at once (the last message of a
// backlog is flushed: the heartbeat, 5 minutes off, is not what brings it).
func TestStreamBacklogFlushedTogether(t *testing.T) {
	st := memory.New(memory.Options{FeedLen: 1 << 16}, "s")
	var flushes, streams atomic.Int64
	srv := servertest.Start(t, servertest.Options{Store: st, Config: server.Config{StaleAfter: time.Hour}, Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != llmdiagv1connect.DiagnosisServiceStreamHealthProcedure {
				next.ServeHTTP(w, r)
				return
			}
			streams.Add(1)
			next.ServeHTTP(flushCounter{w, &flushes}, r)
		})
	}})
	c, err := client.New(srv.URL, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recv := streamRecv(t, ctx, c, &llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(5 * time.Minute)})
	if m := recv(); m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED {
		t.Fatalf("first message %v, want SYNCED (the store is empty)", m.GetKind())
	}
	const nodes, changes = 8, 400
	want := map[string]float64{}
	for i := range changes {
		id := fmt.Sprintf("n-%d", i%nodes)
		score := float64(i) / changes
		if _, err := st.Publish(ctx, change(id, "m", nil, llmdiagv1.Status_STATUS_OK, score)); err != nil {
			t.Fatal(err)
		}
		want[id] = score
	}
	before := flushes.Load()
	got, msgs := map[string]float64{}, 0
	for !maps.Equal(got, want) {
		m := recv()
		msgs++
		if h := m.GetHealth(); h != nil {
			got[h.GetNode()] = h.GetLoadScore()
		}
	}
	if streams.Load() != 1 {
		t.Fatalf("%d streams counted, want 1", streams.Load())
	}
	if n := flushes.Load() - before; n > int64(msgs)/2 {
		t.Errorf("%d messages of a backlog took %d flushes; want at most one for two", msgs, n)
	} else {
		t.Logf("%d messages, %d flushes", msgs, n)
	}
}

// flushCounter counts the flushes that reach net/http's response writer.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w flushCounter) Flush() {
	w.n.Add(1)
	w.ResponseWriter.(http.Flusher).Flush()
}

// Five hundred real streams on one server each get a published change.
func TestStreamManySubscribers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: opens 500 streams")
	}
	url, st := streamServer(t)
	// deliver fails unless every stream gets every change, in order; the
	// delivery latency it measures is a figure for BenchmarkStreamHealth
	// (p50, p99 as metrics), not something a test on a busy machine can
	// bound.
	if lat := deliver(t, url, st, 500, 3); len(lat) != 500*3 {
		t.Fatalf("%d deliveries, want %d (500 streams × 3 changes)", len(lat), 500*3)
	}
}

// deliver opens n streams over conns HTTP/2 connections, publishes `rounds`
// status changes and returns, per stream and change, the time from Publish
// to delivery.
func deliver(t testing.TB, url string, st store.Store, n, rounds int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs := clients(t, url, n)
	type rcv struct {
		at  time.Time
		seq int
	}
	got := make(chan rcv, n*rounds)
	ready := make(chan struct{}, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			s, err := cs[i%len(cs)].StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{Nodes: []string{"a-0"}, HeartbeatInterval: durationpb.New(5 * time.Minute)}))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for s.Receive() {
				m := s.Msg()
				switch m.GetKind() {
				case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
					ready <- struct{}{}
				case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
					got <- rcv{time.Now(), int(m.GetHealth().GetLoadScore())}
				}
			}
			if ctx.Err() == nil {
				errs <- fmt.Errorf("stream ended: %w", s.Err())
			}
		}()
	}
	for range n {
		select {
		case <-ready:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	var lat []time.Duration
	for r := 1; r <= rounds; r++ {
		at := time.Now()
		if _, err := st.Publish(ctx, change("a-0", "alpha", nil, llmdiagv1.Status(1+r%3), float64(r))); err != nil {
			t.Fatal(err)
		}
		for range n {
			select {
			case g := <-got:
				if g.seq != r {
					t.Fatalf("round %d: got change %d", r, g.seq)
				}
				lat = append(lat, g.at.Sub(at))
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: %d of %d streams got the change", r, len(lat)-(r-1)*n, n)
			}
		}
	}
	return lat
}

// clients returns one client per 100 streams, each with its own HTTP/2
// connection (a server allows a hundred streams per connection).
func clients(t testing.TB, url string, n int) []*client.Client {
	t.Helper()
	var cs []*client.Client
	for range (n + 99) / 100 {
		c, err := client.New(url, client.WithProtocol(client.ProtocolGRPC))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}
