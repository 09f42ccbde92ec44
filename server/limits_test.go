package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store/memory"
)

// principalHeader names the principal in these tests, so that one loopback
// client can be several principals.
const principalHeader = "X-Test-Principal"

func headerPrincipal(r *http.Request) string { return r.Header.Get(principalHeader) }

// limitedServer serves the service behind server.Limiter with lim, on a
// listener capped at maxConns connections, until the test ends. It returns
// the base URL.
func limitedServer(t testing.TB, lim server.Limits, maxConns int, opts ...connect.HandlerOption) string {
	t.Helper()
	if lim.Principal == nil {
		lim.Principal = headerPrincipal
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	st := memory.New(memory.Options{}, "limits")
	if _, err := st.Publish(ctx, change("a-0", "alpha", nil, llmdiagv1.Status_STATUS_OK, 0)); err != nil {
		t.Fatal(err)
	}
	svc := server.NewService(st, nil, log, time.Now, server.Config{StaleAfter: time.Hour}, ctx.Done())
	l := server.NewLimiter(lim)
	ready := make(chan struct{})
	close(ready)
	h := l.Wrap(server.Handler(svc, server.NewHealth(ready), prometheus.NewRegistry(), append(opts, connect.WithInterceptors(l.Interceptor()))...))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, server.CapConnections(ln, maxConns), h, log, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// h2c is an HTTP client speaking cleartext HTTP/2 only (prior knowledge),
// on connections of its own.
func h2c(t testing.TB) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// openStream opens a StreamHealth stream as principal and waits for SYNCED;
// a refusal is returned.
func openStream(ctx context.Context, c llmdiagv1connect.DiagnosisServiceClient, principal string) (*connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse], error) {
	req := connect.NewRequest(&llmdiagv1.StreamHealthRequest{})
	req.Header().Set(principalHeader, principal)
	s, err := c.StreamHealth(ctx, req)
	if err != nil {
		return nil, err
	}
	for s.Receive() {
		if s.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_SYNCED {
			return s, nil
		}
	}
	s.Close()
	if s.Err() == nil {
		return nil, errors.New("stream ended before SYNCED")
	}
	return nil, s.Err()
}

func TestStreamCaps(t *testing.T) {
	url := limitedServer(t, server.Limits{MaxStreamsPerPrincipal: 2, MaxStreams: 3}, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := llmdiagv1connect.NewDiagnosisServiceClient(h2c(t), url, connect.WithGRPC())
	refused := func(err error, flag string) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), flag) {
			t.Fatalf("want resource exhausted naming %s, got %v", flag, err)
		}
	}
	var alice []*connect.ServerStreamForClient[llmdiagv1.StreamHealthResponse]
	for range 2 {
		s, err := openStream(ctx, c, "alice")
		if err != nil {
			t.Fatalf("alice's streams within her cap: %v", err)
		}
		defer s.Close()
		alice = append(alice, s)
	}
	_, err := openStream(ctx, c, "alice")
	refused(err, "--max-streams-per-principal")
	if !strings.Contains(err.Error(), `"alice"`) || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("the refusal names neither the principal nor the cap: %v", err)
	}
	bob, err := openStream(ctx, c, "bob")
	if err != nil {
		t.Fatalf("bob's stream while alice is at her cap: %v", err)
	}
	defer bob.Close()
	// Three streams are open: the global cap refuses bob's second.
	_, err = openStream(ctx, c, "bob")
	refused(err, "--max-streams")
	// Alice closes one: she may open another once the server has seen it.
	alice[0].Close()
	testkit.Eventually(t, 20*time.Second, "alice's closed stream to free its slot", func() bool {
		s, err := openStream(ctx, c, "alice")
		if err != nil {
			refused(err, "--max-streams")
			return false
		}
		defer s.Close()
		return true
	})
}

func TestHeartbeatAndNodesBounds(t *testing.T) {
	url := limitedServer(t, server.Limits{}, -1)
	c := llmdiagv1connect.NewDiagnosisServiceClient(http.DefaultClient, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	long := make([]string, 1000)
	for i := range long {
		long[i] = fmt.Sprintf("made-up-%0120d", i)
	}
	tests := []struct {
		name  string
		req   *llmdiagv1.StreamHealthRequest
		field string // "" when accepted
	}{
		{"heartbeat below 5s", &llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(4 * time.Second)}, "heartbeat_interval"},
		{"heartbeat of 5s", &llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(5 * time.Second)}, ""},
		{"1,000 ids of 128 bytes", &llmdiagv1.StreamHealthRequest{Nodes: long}, "nodes"},
		{"100 ids of 128 bytes", &llmdiagv1.StreamHealthRequest{Nodes: long[:100]}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.StreamHealth(ctx, connect.NewRequest(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.Receive()
			err = s.Err()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.HasPrefix(connect.NewError(connect.CodeUnknown, err).Message(), "invalid_argument: "+tc.field+":") {
				t.Fatalf("want invalid argument naming %s, got %v", tc.field, err)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	url := limitedServer(t, server.Limits{RateLimit: 1, RateBurst: 3, Now: clock}, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := llmdiagv1connect.NewDiagnosisServiceClient(http.DefaultClient, url)
	health := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](http.DefaultClient, url+"/grpc.health.v1.Health/Check", connect.WithGRPC())
	list := func(principal string) error {
		req := connect.NewRequest(&llmdiagv1.ListNodesRequest{})
		req.Header().Set(principalHeader, principal)
		_, err := c.ListNodes(ctx, req)
		return err
	}
	for i := range 3 {
		if err := list("alice"); err != nil {
			t.Fatalf("call %d within the burst: %v", i+1, err)
		}
	}
	err := list("alice")
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "--rate-limit") || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("the 4th call at once: want resource exhausted naming the limit, got %v", err)
	}
	if err := list("bob"); err != nil {
		t.Fatalf("bob while alice is limited: %v", err)
	}
	for range 10 {
		req := connect.NewRequest(&healthpb.HealthCheckRequest{})
		req.Header().Set(principalHeader, "alice")
		if _, err := health.CallUnary(ctx, req); err != nil {
			t.Fatalf("health check while alice is limited: %v", err)
		}
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if err := list("alice"); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	if err := list("alice"); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a second call in that second: %v", err)
	}
}

// rawRequest writes an HTTP/1.1 request's head to a new connection.
func rawRequest(t *testing.T, url, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestTrickledBodyIsClosedAtTheReadDeadline(t *testing.T) {
	const timeout = time.Second
	url := limitedServer(t, server.Limits{RequestReadTimeout: timeout}, -1)
	// The server's deadline runs from when it has read the headers: the
	// clock starts before they are written (after, the server could read
	// them first, and its full second look a little shorter from here).
	start := time.Now()
	conn := rawRequest(t, url, "POST /llmdiag.v1.DiagnosisService/ListNodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\nContent-Length: 1000\r\n\r\n")
	// Trickle: a byte every 100 ms, as long as the server reads.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := conn.Write([]byte{0}); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a broken test
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	open := time.Since(start)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "--request-read-timeout") {
		t.Fatalf("want deadline exceeded naming the flag, got %s %s", resp.Status, body)
	}
	if open < timeout {
		t.Fatalf("answered after %v, before the deadline %v", open, timeout)
	}
	t.Logf("trickled body answered after %v (deadline %v)", open, timeout)
	// And the connection is closed: nothing more is read from it.
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection stays open")
	}
}

func TestHeadersOnlyHTTP2StreamIsClosedAtTheReadDeadline(t *testing.T) {
	const timeout = time.Second
	url := limitedServer(t, server.Limits{RequestReadTimeout: timeout}, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Headers, then a body that never comes: the request stream stays open.
	for _, path := range []string{"/llmdiag.v1.DiagnosisService/ListNodes", "/llmdiag.v1.DiagnosisService/StreamHealth"} {
		pr, pw := io.Pipe()
		defer pw.Close()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		start := time.Now()
		resp, err := h2c(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		open := time.Since(start)
		if resp.ProtoMajor != 2 || resp.Trailer.Get("Grpc-Status") != "4" { // DEADLINE_EXCEEDED
			t.Fatalf("%s: want HTTP/2 and grpc-status 4, got %s %v %v", path, resp.Proto, resp.Header, resp.Trailer)
		}
		if open < timeout {
			t.Fatalf("%s: answered after %v, before the deadline", path, open)
		}
		t.Logf("%s: headers-only stream answered after %v (deadline %v)", path, open, timeout)
	}
}

func TestStreamOutlivesTheReadDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two streams each waiting out a 5 s heartbeat")
	}
	// A stream whose request arrived stays open past the deadline, on
	// HTTP/1.1 (Connect) and HTTP/2 (gRPC); its heartbeats arrive after it.
	const timeout = 200 * time.Millisecond
	url := limitedServer(t, server.Limits{RequestReadTimeout: timeout}, -1)
	for _, tc := range []struct {
		name string
		c    llmdiagv1connect.DiagnosisServiceClient
	}{
		{"connect over HTTP/1.1", llmdiagv1connect.NewDiagnosisServiceClient(&http.Client{Transport: &http.Transport{}}, url)},
		{"gRPC over HTTP/2", llmdiagv1connect.NewDiagnosisServiceClient(h2c(t), url, connect.WithGRPC())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := tc.c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(5 * time.Second)}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for s.Receive() {
				if s.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
					return
				}
			}
			t.Fatalf("stream ended before its first heartbeat (5s, deadline %v): %v", timeout, s.Err())
		})
	}
}

// frame is a gRPC frame of payload, flags first.
func frame(flags byte, payload []byte) []byte {
	b := make([]byte, 5, 5+len(payload))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func TestHugeFrameIsRefusedAtItsHeader(t *testing.T) {
	// The read deadline is far: only the frame header can end the call.
	url := limitedServer(t, server.Limits{RequestReadTimeout: time.Hour}, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct{ name, contentType string }{
		{"gRPC-Web", "application/grpc-web+proto"},
		{"gRPC", "application/grpc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() {
				// A header promising 4 GiB, a few bytes, then nothing.
				_, _ = pw.Write([]byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3})
			}()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/llmdiag.v1.DiagnosisService/ListNodes", pr)
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := h2c(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status := resp.Trailer.Get("Grpc-Status") + resp.Header.Get("Grpc-Status")
			if !bytes.Contains(body, []byte("grpc-status:8")) && status != "8" { // RESOURCE_EXHAUSTED
				t.Fatalf("want resource exhausted, got %v %v %q", resp.Header, resp.Trailer, body)
			}
		})
	}
}

// gzipBomb is n zero bytes, gzipped.
func gzipBomb(t testing.TB, n int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(zeros))
		if _, err := zw.Write(zeros[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bombRequest is a request of each protocol carrying bomb as its gzipped
// message.
func bombRequests(ctx context.Context, url string, bomb []byte) map[string]*http.Request {
	path := url + "/llmdiag.v1.DiagnosisService/ListNodes"
	cu, _ := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(bomb))
	cu.Header.Set("Content-Type", "application/proto")
	cu.Header.Set("Content-Encoding", "gzip")
	g, _ := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(frame(1, bomb)))
	g.Header.Set("Content-Type", "application/grpc")
	g.Header.Set("Grpc-Encoding", "gzip")
	return map[string]*http.Request{"connect": cu, "grpc": g}
}

func TestGzipBombIsRefused(t *testing.T) {
	url := limitedServer(t, server.Limits{}, -1)
	// The bomb first: compressing 64 MiB takes seconds under -race on a
	// busy machine, which are not the server's to answer in.
	bomb := gzipBomb(t, 64<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, req := range bombRequests(ctx, url, bomb) {
		resp, err := h2c(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := resp.Trailer.Get("Grpc-Status")
		if name == "connect" {
			code = fmt.Sprint(resp.StatusCode)
		}
		// resource exhausted: gRPC 8, Connect's HTTP 429.
		if (code != "8" && code != "429") || !strings.Contains(string(body)+resp.Trailer.Get("Grpc-Message"), "larger than") {
			t.Fatalf("%s: want resource exhausted, got %s %s %v", name, code, body, resp.Trailer)
		}
	}
}

// BenchmarkGzipBomb sends a 1 MiB gzip gRPC request that inflates to 1 GiB
// (a decompression bomb) and reports the process CPU its refusal costs (client
// and server: the client only writes the megabyte), with the server's
// bounded gzip and, for comparison, connect-go's own.
//
//	go test ./server -run '^$' -bench GzipBomb -benchtime 20x
//
// 2-core machine (AMD EPYC, shared): bounded, 2.4 ms of CPU a request;
// connect-go's gzip 176 ms (medians of 3 runs of 10: 2.4 ms and 176 ms).
func BenchmarkGzipBomb(b *testing.B) {
	bomb := gzipBomb(b, 1<<30)
	b.Run("bounded", func(b *testing.B) { benchBomb(b, bomb) })
	b.Run("connect-gzip", func(b *testing.B) {
		benchBomb(b, bomb, connect.WithCompression("gzip",
			func() connect.Decompressor { return &gzip.Reader{} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }))
	})
}

func benchBomb(b *testing.B, bomb []byte, opts ...connect.HandlerOption) {
	url := limitedServer(b, server.Limits{RateLimit: -1}, -1, opts...)
	ctx := context.Background()
	c := h2c(b)
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		req := bombRequests(ctx, url, bomb)["grpc"]
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Trailer.Get("Grpc-Status") != "8" {
			b.Fatalf("not refused: %v", resp.Trailer)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(len(bomb))/(1<<20), "body-MiB")
}

func TestConnectionCap(t *testing.T) {
	url := limitedServer(t, server.Limits{}, 2)
	addr := strings.TrimPrefix(url, "http://")
	// get makes one HTTP/1.1 request on conn and says whether it was answered.
	get := func(conn net.Conn, r *bufio.Reader) error {
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	var conns []net.Conn
	for i := range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := get(conn, bufio.NewReader(conn)); err != nil {
			t.Fatalf("connection %d within the cap: %v", i+1, err)
		}
		conns = append(conns, conn)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if err := get(third, bufio.NewReader(third)); err == nil {
		t.Fatal("a third connection was served with the cap at 2")
	}
	conns[0].Close()
	testkit.Eventually(t, 20*time.Second, "a new connection once one closed", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer conn.Close()
		return get(conn, bufio.NewReader(conn)) == nil
	})
}

func TestHTTP2Settings(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, ln, http.NotFoundHandler(), slog.New(slog.DiscardHandler), time.Second, server.ServeOptions{MaxConcurrentStreams: 7})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	want := map[http2.SettingID]uint32{http2.SettingMaxConcurrentStreams: 7, http2.SettingInitialWindowSize: server.MaxRequestBytes}
	for id, v := range want {
		if got, ok := sf.Value(id); !ok || got != v {
			t.Errorf("%v = %d (sent: %v), want %d", id, got, ok, v)
		}
	}
	// net/http adds a little for its own accounting of each field.
	if got, _ := sf.Value(http2.SettingMaxHeaderListSize); got < server.MaxHeaderBytes || got > 2*server.MaxHeaderBytes {
		t.Errorf("MAX_HEADER_LIST_SIZE = %d, want about %d", got, server.MaxHeaderBytes)
	}
}
