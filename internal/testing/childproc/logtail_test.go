package childproc_test

import (
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
)

func TestLogTail(t *testing.T) {
	var l childproc.LogTail
	_, _ = l.Write([]byte("server is ready\n"))
	mark := l.Len()
	if l.ContainsSince(mark, "ready") {
		t.Error("ContainsSince finds a line written before the mark")
	}
	_, _ = l.Write([]byte("reloaded\n"))
	if !l.ContainsSince(mark, "reloaded") || !l.ContainsSince(0, "ready") {
		t.Errorf("ContainsSince misses what was written: %q", l.String())
	}
	// Past MaxLogTail the head is dropped, the count goes on, and String
	// says how much was dropped.
	_, _ = l.Write([]byte(strings.Repeat("x", childproc.MaxLogTail)))
	if got, want := l.Len(), len("server is ready\nreloaded\n")+childproc.MaxLogTail; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	if l.ContainsSince(0, "ready") || !strings.HasPrefix(l.String(), "[25 earlier bytes dropped]") {
		t.Errorf("the dropped head is still there or unannounced: %.60q", l.String())
	}
	if _, err := childproc.FreePort(); err != nil {
		t.Fatal(err)
	}
}
