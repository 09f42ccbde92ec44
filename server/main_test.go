package server_test

import (
	"bufio"
	"context"
	"fmt"
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
	var cs []*client.Client
	for range (n + 99) / 100 {
		c, err := client.New(url, client.WithProtocol(client.ProtocolGRPC))
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	synced := make(chan error, n)
	for i := range n {
		go func() {
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
		}()
	}
	for range n {
		if err := <-synced; err != nil {
			return err
		}
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes it
	return nil
}
