package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// ServerProgram and CLIProgram are the binaries Start and StartCluster
// run: REDIS_SERVER_BIN and REDIS_CLI_BIN, then PATH, then /usr/bin.
var (
	ServerProgram = testkit.Program{
		Name:       "redis-server",
		Env:        "REDIS_SERVER_BIN",
		Candidates: []string{"redis-server", "/usr/bin/redis-server"},
		Get:        "apt-get install -y redis-server",
	}
	CLIProgram = testkit.Program{
		Name:       "redis-cli",
		Env:        "REDIS_CLI_BIN",
		Candidates: []string{"redis-cli", "/usr/bin/redis-cli"},
		Get:        "apt-get install -y redis-server",
	}
)

const (
	readyTimeout = 20 * time.Second
	pollInterval = 20 * time.Millisecond
)

// Options configures a server Start runs.
type Options struct {
	// Persist turns on the append-only file (fsync always) so data
	// survives Stop and Restart; by default nothing is persisted.
	Persist bool
	// ExtraArgs are appended to redis-server's command line, e.g.
	// []string{"--maxmemory", "10mb"}.
	ExtraArgs []string

	cluster bool
}

// Server is one redis-server started by Start or StartCluster. Its methods
// are safe for concurrent use, except that those failing the test must be
// called from the test's goroutine.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	opts Options
	srv  childproc.Server
}

// Start runs a redis-server without persistence on a free loopback port
// and returns once it answers PING. Under -short it skips the test; it
// fails the test (never skips) when the binary is missing or the server
// does not come up.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	return start(t, testkit.Binary(t, ServerProgram), t.TempDir(), opts)
}

func start(t testing.TB, bin, dir string, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, bin: bin, dir: dir, opts: opts}
	childproc.Ports{
		Name:   "redistest: redis-server",
		Server: &s.srv,
		Free:   func() (int, error) { return freePort(opts.cluster) },
		Run: func(port int) error {
			s.port = port
			return s.run()
		},
		Stop:  s.Kill,
		About: func() string { return fmt.Sprintf("%s on %s, dir %s", bin, s.Addr(), s.dir) },
	}.Start(t)
	return s
}

// freePort returns a loopback port that was free a moment ago; for a
// cluster node, port+10000 (its cluster bus) was free too.
func freePort(cluster bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !cluster {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, errors.New("find a free port pair for a cluster node: none found")
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", "",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
	}
	if s.opts.Persist {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	}
	if s.opts.cluster {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "5000")
	}
	return append(a, s.opts.ExtraArgs...)
}

// run starts the process and waits for PING.
func (s *Server) run() error {
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	proc, err := s.srv.Launch(cmd)
	if err != nil {
		return err
	}
	return childproc.Ready{
		Name: "redis-server", Addr: s.Addr(), Timeout: readyTimeout, Every: pollInterval,
		Check: func(context.Context) error {
			reply, err := s.Do("PING")
			if err == nil && reply != "PONG" {
				err = fmt.Errorf("PING answered %q", reply)
			}
			return err
		},
	}.Wait(proc)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns a redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Dir returns the server's working directory.
func (s *Server) Dir() string { return s.dir }

// Pid returns the process id, or 0 while stopped.
func (s *Server) Pid() int {
	if p := s.srv.Proc(); p != nil {
		return p.Pid()
	}
	return 0
}

// Stop shuts the server down (SIGTERM to its pid, SIGKILL after a timeout)
// and waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	s.srv.Stop(sig)
}

// Restart stops the server if it runs and starts it again on the same port
// and directory (with persistence, on the same data); it fails the test if
// the server does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for range 50 { // the port may linger briefly after the old process
		mark := s.srv.Logs.Len()
		if err = s.run(); err == nil {
			return
		}
		s.stop(syscall.SIGKILL)
		if !s.srv.Logs.ContainsSince(mark, "already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart on %s: %v", s.Addr(), err)
}

// Do sends one command in RESP and returns a simple or bulk string reply
// (an error reply as an error; arrays and integers as their text). It is
// for set-up and checks, not for the code under test.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.Addr(), args...)
}

func do(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		var parts []string
		for range max(n, 0) {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Cluster is a Redis Cluster of masters started by StartCluster.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns every node's host:port: the seed list for a cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// StartCluster runs masters cluster-enabled redis-servers (at least 3),
// joins them into one cluster without replicas and returns once every node
// reports cluster_state:ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	bin, cli := testkit.Binary(t, ServerProgram), testkit.Binary(t, CLIProgram)
	root := t.TempDir()
	c := &Cluster{}
	for i := range masters {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.Nodes = append(c.Nodes, start(t, bin, dir, Options{cluster: true}))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s", cli, strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(readyTimeout)
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok within %v: %v\n%s\ncreate output:\n%s", n.Addr(), readyTimeout, err, info, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}
