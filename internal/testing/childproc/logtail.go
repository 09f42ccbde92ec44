package childproc

import (
	"fmt"
	"net"
	"strings"
	"sync"
)

// MaxLogTail is how much of a process's output a LogTail keeps.
const MaxLogTail = 256 << 10

// LogTail keeps the last MaxLogTail bytes of a process's output, to quote
// when a test fails and to wait for a line; safe for concurrent use.
type LogTail struct {
	mu      sync.Mutex
	b       []byte
	dropped int
}

func (l *LogTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - MaxLogTail; over > 0 {
		l.b = append(l.b[:0:0], l.b[over:]...)
		l.dropped += over
	}
	return len(p), nil
}

// String is the tail kept, saying how much came before it.
func (l *LogTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 {
		return fmt.Sprintf("[%d earlier bytes dropped]\n%s", l.dropped, l.b)
	}
	return string(l.b)
}

// Len is the number of bytes written so far, dropped ones included: a mark
// for ContainsSince.
func (l *LogTail) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped + len(l.b)
}

// ContainsSince reports whether s was written after the first mark bytes
// (as far as the kept tail reaches).
func (l *LogTail) ContainsSince(mark int, s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := min(max(mark-l.dropped, 0), len(l.b))
	return strings.Contains(string(l.b[from:]), s)
}

// FreePort asks the kernel for a free loopback TCP port. Another process
// may take it before the child binds it: callers start again on another.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
