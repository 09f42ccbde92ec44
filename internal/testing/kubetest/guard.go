package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guard kills etcd and kube-apiserver if the test binary dies without
// running its cleanups. envtest starts each in a process group of its own
// and without a parent-death signal, so nothing else would: they would keep
// their ports and some 400 MB after a -timeout panic.
//
// The guard is a shell reading a pipe whose other end only the test binary
// holds (close-on-exec, so no child inherits it). At the end of the test
// the cleanup writes "done" and the guard exits; when the test binary dies
// the pipe reads end-of-file and the guard kills the process group of every
// pid recorded in its directory. The binaries are started through wrap's
// scripts, which record their own pid (the group's id: envtest makes each
// the leader of a new group) and exec the binary in place.
type guard struct {
	pids string // directory of <name>.pid files
	w    *os.File
	cmd  *exec.Cmd
}

const guardScript = `read line
[ "$line" = done ] && exit 0
for f in "$1"/*.pid; do
	p=$(cat "$f" 2>/dev/null)
	case $p in ''|*[!0-9]*) continue ;; esac
	kill -KILL "-$p" 2>/dev/null
done
exit 0`

func startGuard(t testing.TB, dir string) *guard {
	t.Helper()
	g := &guard{pids: mkdir(t, dir, "pids")}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	g.w = w
	g.cmd = exec.Command("/bin/sh", "-c", guardScript, "kubetest-guard", g.pids)
	g.cmd.Stdin = r
	// Its own group: a ^C to the test's terminal must not take it first.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		w.Close()
		t.Fatalf("kubetest: start the guard process: %v", err)
	}
	return g
}

// wrap returns the path of a script that records its pid as name.pid and
// runs bin in its place.
func (g *guard) wrap(t testing.TB, bin string) string {
	t.Helper()
	name := filepath.Base(bin)
	path := filepath.Join(mkdir(t, filepath.Dir(g.pids), "bin"), name)
	script := "#!/bin/sh\necho $$ > " + shellQuote(filepath.Join(g.pids, name+".pid")) + "\nexec " + shellQuote(bin) + ` "$@"` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// release tells the guard the processes were stopped, and reaps it.
func (g *guard) release() {
	_, _ = g.w.WriteString("done\n")
	g.w.Close()
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		_ = g.cmd.Process.Kill()
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
