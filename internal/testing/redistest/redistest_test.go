package redistest_test

import (
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/redistest"
)

func TestStartStopRestart(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Persist: true})
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	s.Restart()
	if s.Pid() == pid {
		t.Fatalf("Restart kept pid %d", pid)
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("after restart with persistence: %q %v", v, err)
	}
	s.Kill()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Restart()
	if v, err := s.Do("PING"); err != nil || v != "PONG" {
		t.Fatalf("after Kill and Restart: %q %v", v, err)
	}
}

func TestNoPersistenceByDefault(t *testing.T) {
	s := redistest.Start(t)
	s.Do("SET", "k", "v")
	s.Restart()
	if v, _ := s.Do("GET", "k"); v != "" {
		t.Fatalf("GET after restart = %q, want nothing", v)
	}
}

func TestStartCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, n := range c.Nodes {
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_size:3") {
			t.Fatalf("%s: %v\n%s", n.Addr(), err, info)
		}
	}
}
