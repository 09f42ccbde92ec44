package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// haproxyFixture is a service over a memory store holding a node of each
// kind the agent's reply tells apart, observed at now (stale-0 45 s
// before, past the 30 s stale-after). Model "g" has four nodes with a
// per-request decode speed: three at 30 tok/s, slow-0 at 12 and
// slow-outlier-0 at 27; model "h" three at 30 and straggler-0 at 3, all
// at load score 0.5; model "p" four alike but for paced-0's inter-token
// latency, model "q" but for q-slow-0's decode speed; model "s" two
// nodes both saturated.
func haproxyFixture(t *testing.T, now time.Time) *server.Service {
	t.Helper()
	st := memory.New(memory.Options{}, "haproxy")
	put := func(id, model string, status llmdiagv1.Status, cause llmdiagv1.Cause, routable bool, score float64, age time.Duration, speed *float64) {
		rec := &store.Record{
			Node:    &llmdiagv1.Node{Id: id, Model: model, Status: status, RootCause: cause, Routable: routable, LoadScore: score},
			Metrics: &llmdiagv1.NodeMetrics{Node: id, ObservedAt: timestamppb.New(now.Add(-age)), DecodeTokensPerSecondPerRequest: speed},
		}
		if err := st.Put(context.Background(), rec, diagnose.Point{}); err != nil {
			t.Fatal(err)
		}
	}
	ok, warn, crit := llmdiagv1.Status_STATUS_OK, llmdiagv1.Status_STATUS_WARN, llmdiagv1.Status_STATUS_CRIT
	healthy := llmdiagv1.Cause_CAUSE_HEALTHY
	fresh := 2 * time.Second
	put("idle-0", "m", ok, healthy, true, 0, fresh, nil)
	put("half-0", "m", ok, healthy, true, 0.5, fresh, nil)
	put("full-0", "m", warn, llmdiagv1.Cause_CAUSE_BURST, true, 1, fresh, nil)
	put("nan-0", "m", ok, healthy, true, -1, fresh, nil)
	put("saturated-0", "m", warn, llmdiagv1.Cause_CAUSE_OVERLOADED, false, 1.4, fresh, nil)
	put("kv-0", "m", crit, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, false, 1.2, fresh, nil)
	put("stalled-0", "m", crit, llmdiagv1.Cause_CAUSE_STALLED, false, 0.5, fresh, nil)
	put("down-0", "m", llmdiagv1.Status_STATUS_DOWN, llmdiagv1.Cause_CAUSE_TARGET_DOWN, false, 0, fresh, nil)
	put("stale-0", "m", ok, healthy, true, 0.2, 45*time.Second, nil)
	put("nodata-0", "m", llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false, 0, fresh, nil)
	put("outlier-0", "m", warn, llmdiagv1.Cause_CAUSE_NODE_OUTLIER, true, 0, fresh, nil)
	v := func(f float64) *float64 { return &f }
	for _, id := range []string{"g-0", "g-1", "g-2"} {
		put(id, "g", ok, healthy, true, 0, fresh, v(30))
	}
	put("slow-0", "g", ok, healthy, true, 0, fresh, v(12))
	put("slow-outlier-0", "g", warn, llmdiagv1.Cause_CAUSE_NODE_OUTLIER, true, 0.5, fresh, v(27))
	for _, id := range []string{"h-0", "h-1", "h-2"} {
		put(id, "h", ok, healthy, true, 0.5, fresh, v(30))
	}
	put("straggler-0", "h", ok, healthy, true, 0.5, fresh, v(3))
	// Model "s": both nodes saturated, neither routable.
	put("sat-0", "s", warn, llmdiagv1.Cause_CAUSE_OVERLOADED, false, 1.3, fresh, nil)
	put("sat-1", "s", warn, llmdiagv1.Cause_CAUSE_OVERLOADED, false, 1.1, fresh, nil)
	// Model "p": three nodes and paced-0 whose decode speeds (the
	// generation rate over their few running requests) read alike, while
	// paced-0's inter-token latency is ten times its peers'.
	// Model "q" likewise, but for q-slow-0's decode speed, a tenth of
	// its peers' while its pace reads theirs: the lower one decides.
	for _, id := range []string{"p-0", "p-1", "p-2", "paced-0", "q-0", "q-1", "q-2", "q-slow-0"} {
		itl, speed := 0.03, 30.0
		switch id {
		case "paced-0":
			itl = 0.3
		case "q-slow-0":
			speed = 3
		}
		rec := &store.Record{
			Node: &llmdiagv1.Node{Id: id, Model: id[:1], Status: ok, RootCause: healthy, Routable: true, LoadScore: 0.5},
			Metrics: &llmdiagv1.NodeMetrics{Node: id, ObservedAt: timestamppb.New(now.Add(-fresh)), DecodeTokensPerSecondPerRequest: v(speed),
				InterToken: &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: itl}, {Quantile: 0.99, Value: 2 * itl}}}},
		}
		if err := st.Put(context.Background(), rec, diagnose.Point{}); err != nil {
			t.Fatal(err)
		}
	}
	return server.NewService(st, nil, slog.New(slog.DiscardHandler), func() time.Time { return now }, server.Config{StaleAfter: 30 * time.Second}, nil)
}

// TestHAProxyAgentReply maps records, and bad agent-send lines, to replies.
func TestHAProxyAgentReply(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	agent, err := haproxyFixture(t, now).HAProxyAgent(server.HAProxyAgentOptions{Registerer: reg, ReadTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	failOpen := "ready up 100% #llmdiag: no fresh data (fail open)"
	for _, c := range []struct {
		name, send, reply, kind string
	}{
		{"routable, score 0", "idle-0\n", "ready up 100% #CAUSE_HEALTHY", "up"},
		{"routable, score 0.5", "half-0\n", "ready up 55% #CAUSE_HEALTHY", "up"},
		{"routable, score 1", "full-0\n", "ready up 10% #CAUSE_BURST", "up"},
		{"routable, negative score reads 0", "nan-0\n", "ready up 100% #CAUSE_HEALTHY", "up"},
		{"CRLF", "half-0\r\n", "ready up 55% #CAUSE_HEALTHY", "up"},
		{"saturated queue", "saturated-0\n", "up drain #CAUSE_OVERLOADED", "drain"},
		{"saturated KV", "kv-0\n", "up drain #CAUSE_KV_EXHAUSTED", "drain"},
		{"stalled", "stalled-0\n", "down #CAUSE_STALLED", "down"},
		{"down", "down-0\n", "down #CAUSE_TARGET_DOWN", "down"},
		{"stale", "stale-0\n", failOpen, "fail_open"},
		{"unknown verdict", "nodata-0\n", failOpen, "fail_open"},
		{"unknown node", "nobody\n", failOpen, "fail_open"},
		{"outlier without speeds: half", "outlier-0\n", "ready up 50% #CAUSE_NODE_OUTLIER", "up"},
		{"peers at full speed", "g-0\n", "ready up 100% #CAUSE_HEALTHY", "up"},
		{"decodes at 0.4 of the median: 0.4² of 100%", "slow-0\n", "ready up 16% #CAUSE_HEALTHY", "up"},
		{"outlier at 0.9 of the median: 0.9² of 55%", "slow-outlier-0\n", "ready up 45% #CAUSE_NODE_OUTLIER", "up"},
		{"decodes at a tenth of the median: 0.1² of 55%, at least 1%", "straggler-0\n", "ready up 1% #CAUSE_HEALTHY", "up"},
		{"straggler's peer", "h-0\n", "ready up 55% #CAUSE_HEALTHY", "up"},
		{"inter-token latency ten times its peers', decode speeds alike: the lower decides", "paced-0\n", "ready up 1% #CAUSE_HEALTHY", "up"},
		{"decode speed a tenth of its peers', pace alike: the lower decides", "q-slow-0\n", "ready up 1% #CAUSE_HEALTHY", "up"},
		{"paced-0's peer", "p-0\n", "ready up 55% #CAUSE_HEALTHY", "up"},
		{"saturated like every peer: the least weight, not a drain", "sat-0\n", "ready up 10% #CAUSE_OVERLOADED", "up"},
		{"saturated like every peer, the other", "sat-1\n", "ready up 10% #CAUSE_OVERLOADED", "up"},
		{"overlong line", strings.Repeat("a", 300) + "\n", "ready up 100% #llmdiag: agent-send line longer than 256 bytes (fail open)", "bad_input"},
		{"no newline", "idle-0", "ready up 100% #llmdiag: no agent-send line (the node id and \\n) within 50ms (fail open)", "bad_input"},
		{"invalid id", "-x\n", "ready up 100% #llmdiag: invalid node id in agent-send (fail open)", "bad_input"},
	} {
		reply, kind := agent.Exchange(context.Background(), bufio.NewReaderSize(strings.NewReader(c.send), server.HAProxyAgentMaxLine))
		if reply != c.reply || kind != c.kind {
			t.Errorf("%s: %q (%s), want %q (%s)", c.name, reply, kind, c.reply, c.kind)
		}
	}
	want := `# HELP llmdiag_haproxy_agent_replies_total Replies of the HAProxy agent check (serve --haproxy-agent-listen), by kind: up, drain, down, fail_open, bad_input.
# TYPE llmdiag_haproxy_agent_replies_total counter
llmdiag_haproxy_agent_replies_total{kind="bad_input"} 3
llmdiag_haproxy_agent_replies_total{kind="down"} 2
llmdiag_haproxy_agent_replies_total{kind="drain"} 2
llmdiag_haproxy_agent_replies_total{kind="fail_open"} 3
llmdiag_haproxy_agent_replies_total{kind="up"} 16
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmdiag_haproxy_agent_replies_total"); err != nil {
		t.Error(err)
	}
}

// startAgent serves a haproxyFixture agent on a loopback port until the
// test ends, and returns its address.
func startAgent(t *testing.T, maxConns int) string {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	agent, err := haproxyFixture(t, now).HAProxyAgent(server.HAProxyAgentOptions{ReadTimeout: time.Second, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5s of cancellation")
		}
	})
	return ln.Addr().String()
}

// agentExchange connects to addr, sends send (nothing when empty) and
// returns what the agent wrote before closing.
func agentExchange(t *testing.T, addr, send string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if send != "" {
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestHAProxyAgentServe talks to the agent over loopback TCP as HAProxy
// does: a reply to an agent-send line, and a reply after the read
// deadline (a second) to a connection that sends nothing.
func TestHAProxyAgentServe(t *testing.T) {
	addr := startAgent(t, 0)
	if got := agentExchange(t, addr, "saturated-0\n"); got != "up drain #CAUSE_OVERLOADED\n" {
		t.Errorf("saturated-0: %q", got)
	}
	if got := agentExchange(t, addr, ""); !strings.HasPrefix(got, "ready up 100% #llmdiag: no agent-send line") {
		t.Errorf("nothing sent: %q", got)
	}
}

// TestHAProxyAgentConnectionCap: with two connections holding both slots
// of an agent capped at two (sending nothing), a third is closed without
// a reply; the two are answered at their read deadline, and then there
// is room again.
func TestHAProxyAgentConnectionCap(t *testing.T) {
	addr := startAgent(t, 2)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Connections are accepted in the order they arrive, so the third is
	// accepted while the two hold their slots (for the read deadline, a
	// second).
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = third.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(third, "idle-0\n")
	if b, _ := io.ReadAll(third); len(b) != 0 {
		t.Errorf("a connection beyond the cap: reply %q, want none", b)
	}
	third.Close()
	for _, c := range held {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if b, _ := io.ReadAll(c); !strings.HasPrefix(string(b), "ready up 100% #llmdiag: no agent-send") {
			t.Errorf("held connection: %q", b)
		}
		c.Close()
	}
	// A slot is given back just after the agent closes its side: the
	// first connection after may still find none.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := agentExchange(t, addr, "idle-0\n")
		if got == "ready up 100% #CAUSE_HEALTHY\n" {
			break
		}
		if got != "" || time.Now().After(deadline) {
			t.Fatalf("after the cap: %q", got)
		}
	}
}

// TestHAProxyAgentStopAnswer: once its context is done, an agent with
// StopAnswer answers every check, a drained node's too, with
// HAProxyAgentStopping (HAProxy keeps the last state an agent gave, so
// this is how a stopping llmdiag hands every server back), and closes its
// listener StopAnswer later; without StopAnswer it closes at once.
func TestHAProxyAgentStopAnswer(t *testing.T) {
	const window = 3 * time.Second
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	agent, err := haproxyFixture(t, now).HAProxyAgent(server.HAProxyAgentOptions{ReadTimeout: time.Second, StopAnswer: window})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, ln) }()
	if got := agentExchange(t, addr, "saturated-0\n"); got != "up drain #CAUSE_OVERLOADED\n" {
		t.Fatalf("before the stop: %q", got)
	}
	cancel()
	stopped := time.Now()
	// Within the window every check gets the stopping reply; after it the
	// listener is closed. What is asserted is only what each answer says.
	if got := agentExchange(t, addr, "saturated-0\n"); got != server.HAProxyAgentStopping+"\n" && time.Since(stopped) < window {
		t.Errorf("stopping, saturated-0: %q, want %q", got, server.HAProxyAgentStopping)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		if d := time.Since(stopped); d < window {
			t.Errorf("Serve returned %v after the stop, before the %v window ended", d, window)
		}
	case <-time.After(window + 10*time.Second):
		t.Fatalf("Serve did not return within %v of the stop", window+10*time.Second)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the listener still accepts after the window")
	}
}
