package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// script writes an executable file into a temporary directory.
func script(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProgramFind(t *testing.T) {
	exe := script(t, "tool")
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(exe))
	for _, tc := range []struct {
		name   string
		env    string // TESTKIT_TOOL's value
		p      Program
		want   string   // the path found, or
		errHas []string // what the error says
	}{
		{name: "on PATH", p: Program{Name: "tool"}, want: exe},
		{name: "absolute candidate", p: Program{Name: "x", Candidates: []string{"nope", exe}}, want: exe},
		{name: "override", env: exe, p: Program{Name: "x", Env: "TESTKIT_TOOL"}, want: exe},
		{name: "override wins over PATH", env: exe, p: Program{Name: "tool", Env: "TESTKIT_TOOL", Candidates: []string{"nope"}}, want: exe},
		{name: "override not executable", env: plain, p: Program{Name: "tool", Env: "TESTKIT_TOOL", Get: "apt-get install -y tool"},
			errHas: []string{"TESTKIT_TOOL=" + plain + " is not an executable file", "make deps", "apt-get install -y tool", "set TESTKIT_TOOL to a tool binary"}},
		{name: "missing", p: Program{Name: "gone", Candidates: []string{"gone", plain}, Get: "apt-get install -y gone"},
			errHas: []string{"gone not found (looked for gone on PATH, " + plain + ")", "run `make deps` or apt-get install -y gone"}},
		{name: "missing, no package", p: Program{Name: "gone"}, errHas: []string{"gone not found (looked for gone on PATH): run `make deps`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TESTKIT_TOOL", tc.env)
			got, err := tc.p.Find()
			if tc.errHas == nil {
				if err != nil || got != tc.want {
					t.Fatalf("Find() = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Find() = %q, want an error", got)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestBinaryFailsWhenMissing: a missing program fails the test, it never
// skips it.
func TestBinaryFailsWhenMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: Binary skips before it looks")
	}
	msg := Fails(t, func(tb testing.TB) {
		Binary(tb, Program{Name: "no-such-program-anywhere", Get: "apt-get install -y it"})
	})
	if !strings.Contains(msg, "no-such-program-anywhere not found") || !strings.Contains(msg, "apt-get install -y it") {
		t.Fatalf("Binary failed with %q, want what is missing and how to get it", msg)
	}
	if got := Fails(t, func(tb testing.TB) { tb.Fatal("a", "b") }); got != "ab" {
		t.Fatalf("Fails = %q, want the Fatal message", got)
	}
	if got := Fails(t, func(testing.TB) {}); got != "" {
		t.Fatalf("Fails = %q for a function that did not fail", got)
	}
}
