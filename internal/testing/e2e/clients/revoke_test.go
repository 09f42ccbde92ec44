package clients_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeRevokesOpenStreams is serve with --auth-tokens on the seed
// fleet: removing a token from the file ends its open StreamHealth stream
// with Unauthenticated within a second of serve's own reload (its log line
// "tokens file reloaded" dates it), with no request to prompt the reload;
// another token's stream goes on; downgrading that token's role to reader
// ends its stream with PermissionDenied.
func TestServeRevokesOpenStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve on the simulated seed fleet")
	}
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	clitest.Sim(t, "seed", fleetPath)
	const tokA, tokB = "router-a-token-0123456789abcdef", "router-b-token-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens.yaml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(tokens+".tmp", []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tokens+".tmp", tokens); err != nil {
			t.Fatal(err)
		}
	}
	write("tokens:\n  - {name: router-a, role: router, token: " + tokA + "}\n  - {name: router-b, role: router, token: " + tokB + "}\n")

	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	serveLog := clitest.Background(t, nil, "serve", "--listen", addr, "--fleet", fleetPath, "--interval", "500ms", "--auth-tokens", tokens, "--log-format", "json")
	clitest.WaitFor(t, "serve", 30*time.Second, func() bool { return clitest.AuthPost(t, base+"/grpc.health.v1.Health/Check", "") == http.StatusOK })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func(tok string) *connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse] {
		t.Helper()
		c, err := client.New(base, client.WithBearerToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(5 * time.Second)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		for s.Receive() {
			if s.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_SYNCED {
				return s
			}
		}
		t.Fatalf("stream ended before SYNCED: %v", s.Err())
		return nil
	}
	// reloads is the times of serve's "tokens file reloaded" lines.
	reloads := func() []time.Time {
		var at []time.Time
		sc := bufio.NewScanner(strings.NewReader(serveLog.String()))
		for sc.Scan() {
			var line struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "tokens file reloaded" {
				at = append(at, line.Time)
			}
		}
		return at
	}
	// endsAfterReload waits for s to end and for serve's reload number n,
	// and returns how long after the reload s ended, and its error.
	endsAfterReload := func(s *connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse], n int) (time.Duration, error) {
		t.Helper()
		for s.Receive() {
		}
		end := time.Now()
		clitest.WaitFor(t, "serve's reload logged", 30*time.Second, func() bool { return len(reloads()) >= n })
		return end.Sub(reloads()[n-1]), s.Err()
	}

	a, b := open(tokA), open(tokB)
	write("tokens:\n  - {name: router-b, role: router, token: " + tokB + "}\n")
	delay, err := endsAfterReload(a, 1)
	t.Logf("removed token's stream ended %v after serve's reload", delay)
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("removed token's stream ended with %v, want Unauthenticated", err)
	}
	if delay >= time.Second {
		t.Errorf("removed token's stream ended %v after serve's reload, want < 1s", delay)
	}
	if !b.Receive() { // a change or a heartbeat (one each 5s): still open
		t.Fatalf("other token's stream ended: %v", b.Err())
	}

	write("tokens:\n  - {name: router-b, role: reader, token: " + tokB + "}\n")
	delay, err = endsAfterReload(b, 2)
	t.Logf("downgraded token's stream ended %v after serve's reload", delay)
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("downgraded token's stream ended with %v, want PermissionDenied", err)
	}
	if delay >= time.Second {
		t.Errorf("downgraded token's stream ended %v after serve's reload, want < 1s", delay)
	}
}
