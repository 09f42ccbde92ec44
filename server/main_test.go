package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// streamClientEnv names, in a child of the test binary started by
// BenchmarkStreamHealthServerMemory, the server to open streams on.
const streamClientEnv = "LLMDIAG_STREAM_CLIENT_URL"

// TestMain turns the test binary into the benchmark's stream client when
// streamClientEnv is set: the client's memory then stays out of the
// server's figures.
func TestMain(m *testing.M) {
	if url := os.Getenv(streamClientEnv); url != "" {
		n, _ := strconv.Atoi(os.Getenv("LLMDIAG_BENCH_STREAMS"))
		if err := streamClients(url, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// streamClients opens n idle streams on url, prints "ready" once all are
// synced, and holds them until standard input closes. Each selects a-0 and,
// when LLMDIAG_BENCH_STREAM_IDS is set, that many made-up ids of 128 bytes
// besides.
func streamClients(url string, n int) error {
	nodes := []string{"a-0"}
	ids, _ := strconv.Atoi(os.Getenv("LLMDIAG_BENCH_STREAM_IDS"))
	for i := range ids {
		nodes = append(nodes, fmt.Sprintf("made-up-%0120d", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := loopbackClients(url, n)
	if err != nil {
		return err
	}
	synced := make(chan error, n)
	open := func(i int) {
		s, err := cs[i%len(cs)].StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{Nodes: nodes, HeartbeatInterval: durationpb.New(5 * time.Minute)}))
		if err != nil {
			synced <- err
			return
		}
		defer s.Close()
		for s.Receive() {
			if s.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_SYNCED {
				synced <- nil
			}
		}
		if ctx.Err() == nil {
			synced <- fmt.Errorf("stream ended: %w", s.Err())
		}
	}
	if err := spread(len(cs), n, open, synced, 2*time.Minute); err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes it
	return nil
}

// loopbackClients returns one gRPC client of url (on loopback) per 100
// streams, client i connecting from loopback host i of 127.1.0.0/16
// (127.1.0.1, 127.1.0.2, ...): to a server whose per-principal limits
// count by remote host, as serve's do when no one authenticates, each
// client is a caller of its own, allowed its 100 streams. It fails when the
// system does not route those addresses to itself (Linux routes all of
// 127.0.0.0/8 to loopback; other systems may only have 127.0.0.1).
func loopbackClients(url string, n int) ([]*client.Client, error) {
	var cs []*client.Client
	for i := range (n + 99) / 100 {
		from := &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/250), byte(1+i%250))}
		probe, err := net.ListenTCP("tcp", from)
		if err != nil {
			return nil, fmt.Errorf("loopback host %v: %w", from.IP, err)
		}
		_ = probe.Close()
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		hc := &http.Client{Transport: &http.Transport{
			Protocols:   &protocols,
			DialContext: (&net.Dialer{LocalAddr: from}).DialContext,
		}}
		c, err := client.New(url, client.WithProtocol(client.ProtocolGRPC), client.WithHTTPClient(hc))
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// spread starts n streams over k clients (go open(i), stream i on client
// i%k; each sends once to started when it is synced, or its error): the
// first stream of each client, then, once those are synced, the rest. A new
// client's streams started all at once each dial a cleartext HTTP/2
// connection of their own before the first is up, hundreds for a hundred
// streams, which the server's connection cap refuses and whose idle
// survivors the per-stream figures would count. It gives up after timeout.
func spread(k, n int, open func(i int), started <-chan error, timeout time.Duration) error {
	give := time.After(timeout)
	wait := func(m int) error {
		for range m {
			select {
			case err := <-started:
				if err != nil {
					return err
				}
			case <-give:
				return fmt.Errorf("streams not synced within %v", timeout)
			}
		}
		return nil
	}
	first := min(k, n)
	for i := range first {
		go open(i)
	}
	if err := wait(first); err != nil {
		return err
	}
	for i := first; i < n; i++ {
		go open(i)
	}
	return wait(n - first)
}
