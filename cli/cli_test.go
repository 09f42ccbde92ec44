package cli_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llmdiag/llmdiag/cli"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

func env(vars map[string]string, out, errw *testkit.SyncBuffer) cli.Env {
	return cli.Env{Getenv: func(k string) string { return vars[k] }, Stdout: out, Stderr: errw}
}

// run runs one command to completion and returns its output.
func run(t *testing.T, vars map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errw testkit.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cli.Run(ctx, args, env(vars, &out, &errw))
	return out.String(), errw.String(), err
}

// background starts a long-running command and stops it at cleanup.
func background(t testing.TB, vars map[string]string, args ...string) *testkit.SyncBuffer {
	t.Helper()
	var out, errw testkit.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, args, env(vars, &out, &errw)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v\n%s", args[0], err, errw.String())
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop within 15s of cancellation", args[0])
		}
	})
	return &errw
}

// waitFor waits for ok, polling every 100ms (ok runs a command), and
// logs the last answer when it times out.
func waitFor(t testing.TB, what string, d time.Duration, ok func() bool, last ...*string) {
	t.Helper()
	w := testkit.Wait{For: d, Every: 100 * time.Millisecond}
	if len(last) > 0 {
		w.Last = func() string { return *last[0] }
	}
	w.Until(t, what, ok)
}

// TestSeedEndToEnd is `make run` in a test: the simulator's seed scenario,
// llmdiag serving it, and the CLI asking it.
func TestSeedEndToEnd(t *testing.T) {
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	background(t, nil, "sim", "--scenario", "seed", "--fleet-out", fleetPath, "--log-level", "warn")
	waitFor(t, "the fleet file", 30*time.Second, func() bool { _, err := os.Stat(fleetPath); return err == nil })

	addr := testkit.FreeAddr(t)
	// Flags from the environment, as LLMDIAG_* variables.
	vars := map[string]string{"LLMDIAG_LISTEN": addr, "LLMDIAG_ADDR": "http://" + addr, "LLMDIAG_INTERVAL": "500ms"}
	serveLog := background(t, vars, "serve", "--fleet", fleetPath)
	waitFor(t, "the first verdicts", 30*time.Second, func() bool {
		out, _, err := run(t, vars, "nodes")
		return err == nil && strings.Contains(out, "deepseek-v4-0")
	})
	// The window fills as refreshes accumulate; the seed's deepseek nodes
	// finish a request every few seconds, so the decode-bound verdict needs
	// a few of them.
	// (protojson varies its whitespace on purpose: parse, never grep.)
	var diag string
	resp := &llmdiagv1.DiagnoseNodeResponse{}
	waitFor(t, "deepseek-v4-0 to be diagnosed decode-bound with the seed's E2E tail", 60*time.Second, func() bool {
		o, _, err := run(t, vars, "diagnose", "deepseek-v4-0", "--format", "json")
		diag = o
		if err != nil || protojson.Unmarshal([]byte(o), resp) != nil {
			return false
		}
		d := resp.GetDiagnosis()
		// Past the first, lifetime-only refresh (rates known), and with the
		// long requests finished in the window that make the E2E tail the
		// seed reads: before that DECODE_BOUND rests on stalls between
		// tokens alone.
		return d.GetRootCause() == llmdiagv1.Cause_CAUSE_DECODE_BOUND && d.GetWindow() == "5m" &&
			len(d.GetFindings()) > 5 && d.GetFindings()[5].GetStatus() == llmdiagv1.Status_STATUS_WARN
	}, &diag)

	out, _, err := run(t, vars, "nodes")
	if err != nil {
		t.Fatalf("nodes: %v", err)
	}
	for _, id := range []string{"deepseek-v4-0", "deepseek-v4-1", "glm-4.6-0", "kimi-k2.6-0"} {
		if !strings.Contains(out, id) {
			t.Errorf("nodes lacks %s:\n%s", id, out)
		}
	}

	// The six core findings of the worked example, in order, with its statuses.
	seed := []struct {
		ind    llmdiagv1.Indicator
		status llmdiagv1.Status
	}{
		{llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, llmdiagv1.Status_STATUS_OK},
		{llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Status_STATUS_WARN},
		{llmdiagv1.Indicator_INDICATOR_E2E_P99, llmdiagv1.Status_STATUS_WARN},
	}
	fs := resp.GetDiagnosis().GetFindings()
	if len(fs) < len(seed) {
		t.Fatalf("%d findings:\n%s", len(fs), diag)
	}
	for i, w := range seed {
		if fs[i].GetIndicator() != w.ind {
			t.Errorf("finding %d is %v, want %v", i, fs[i].GetIndicator(), w.ind)
		}
		// Queue spikes come and go in the simulation: a spike caught at the
		// moment of the read may make the queue findings WARN.
		if fs[i].GetStatus() != w.status && w.ind != llmdiagv1.Indicator_INDICATOR_QUEUE && w.ind != llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO {
			t.Errorf("%v is %v, want %v", w.ind, fs[i].GetStatus(), w.status)
		}
	}
	_ = serveLog
	for _, lang := range []struct{ flag, want string }{{"en", "Not memory, not queueing"}, {"zh", "不是显存不够"}} {
		out, _, err = run(t, vars, "diagnose", "deepseek-v4-0", "--lang", lang.flag, "--format", "markdown")
		if err != nil || !strings.Contains(out, lang.want) || !strings.Contains(out, "| ") {
			t.Fatalf("diagnose --lang %s: %v\n%s", lang.flag, err, out)
		}
	}

	// Under load a scrape can miss its deadline and leave one node without
	// data for a refresh: wait for a comparison with all three models ranked.
	waitFor(t, "compare --by model to rank three models", 30*time.Second, func() bool {
		o, _, err := run(t, vars, "compare", "--metric", "ttft", "--by", "model")
		out = o
		if err != nil {
			return false
		}
		for _, m := range []string{"deepseek-v4", "glm-4.6", "kimi-k2.6", "#1", "#2", "#3"} {
			if !strings.Contains(o, m) {
				return false
			}
		}
		return true
	}, &out)
	out, _, err = run(t, vars, "metrics", "glm-4.6-0")
	if err != nil || !strings.Contains(out, "ttft") || !strings.Contains(out, "kv pressure") {
		t.Fatalf("metrics: %v\n%s", err, out)
	}

	// watch prints the current state, the marker, then runs until stopped.
	var wout, werr testkit.SyncBuffer
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer wcancel()
	if err := cli.Run(wctx, []string{"watch", "--model", "glm-4.6", "--heartbeat", "5s"}, env(vars, &wout, &werr)); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if w := wout.String(); !strings.Contains(w, "glm-4.6-0") || !strings.Contains(w, "current state above") || strings.Contains(w, "deepseek") {
		t.Fatalf("watch --model glm-4.6 printed:\n%s\n%s", w, werr.String())
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args     []string
		vars     map[string]string
		wantCode int
		want     string
	}{
		{[]string{"--help"}, nil, 0, ""},
		{[]string{"bogus-command"}, nil, 2, ""},
		{[]string{"serve"}, nil, 2, "no nodes"},
		{[]string{"serve", "--target", "nourl"}, nil, 2, "id=url"},
		{[]string{"serve", "--target", "a=ftp://x"}, nil, 2, "url"},
		// A malformed target or fleet URL is named without its password
		// (checked for every case below).
		{[]string{"serve", "--target", "a=http://u:s3cret@h/metrics,bogus=1"}, nil, 2, `--target "a=http://u:xxxxx@h/metrics,bogus=1": unknown target attribute "bogus"`},
		{[]string{"serve", "--target", "a=ftp://u:s3cret@h/metrics"}, nil, 2, `nodes[0].url "ftp://u:xxxxx@h/metrics"`},
		{[]string{"serve", "--target", "a=http://h/metrics,follow_redirects=maybe"}, nil, 2, "follow_redirects"},
		{[]string{"serve", "--target", "a=http://h/metrics", "--redis-password-file", "/nonexistent"}, nil, 2, "--redis-password-file without --redis"},
		{[]string{"serve", "--target", "a=http://h/metrics", "--redis", "redis://u:s3cret@h:1", "--redis-password-file", "/nonexistent"}, nil, 2, "--redis: read password"},
		{[]string{"serve", "--prometheus", "http://u:s3cret@h:99999x"}, nil, 2, "--prometheus"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--window", "forever"}, nil, 2, "window"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics"}, map[string]string{"LLMDIAG_INTERVAL": "soon"}, 2, "LLMDIAG_INTERVAL"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--prometheus-max-in-flight", "4", "--prometheus-on-demand-in-flight", "4"}, nil, 2, "--prometheus-on-demand-in-flight"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--max-request-queries", "0"}, nil, 2, "--max-request-queries"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--offset-step", "-1s"}, nil, 2, "--offset-step"},
		{[]string{"sim", "--scenario", "nope"}, nil, 2, "nope"},
		{[]string{"diagnose"}, nil, 2, "NODE"},
		{[]string{"diagnose", "x", "--lang", "fr"}, nil, 2, "--lang"},
		{[]string{"compare", "--metric", "speed"}, nil, 2, "--metric"},
		{[]string{"compare", "--quantiles", "half"}, nil, 2, "--quantiles"},
		{[]string{"nodes", "--protocol", "smoke-signals"}, nil, 2, "--protocol"},
		{[]string{"nodes", "--status", "sleepy"}, nil, 2, "--status"},
		{[]string{"nodes", "--status", "unspecified"}, nil, 2, "--status"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--retention", "9s"}, nil, 2, "--retention"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--max-nodes", "0"}, nil, 2, "--max-nodes"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--rate-burst", "0"}, nil, 2, "--rate-burst"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--max-streams", "-1"}, nil, 2, "--max-streams"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--slack-signing-secret-file", "/nonexistent"}, nil, 2, "--slack-signing-secret-file: open /nonexistent"},
		// Global flags: the client flags only, and only before a client command.
		{[]string{"--addr", "http://127.0.0.1:1", "serve"}, nil, 2, "--addr: a flag of the client commands (nodes, metrics, history, diagnose, compare, watch, bench, mcp), which serve does not take"},
		{[]string{"--lang", "zh", "diagnose", "x"}, nil, 2, "--lang is a flag of diagnose, bench, to give after the command name"},
		{[]string{"--format", "json", "nodes"}, nil, 2, "--format is a flag of nodes, metrics, history, diagnose, compare, bench, to give after the command name"},
		{[]string{"--bogus", "nodes"}, nil, 2, "flag provided but not defined: -bogus (the flags before a command are --addr, --ca, --cert, --key, --protocol, --timeout, --token"},
		{[]string{"--protocol", "smoke-signals", "nodes"}, nil, 2, "--protocol"},
		{[]string{"nodes"}, map[string]string{"LLMDIAG_ADDR": "::not a url"}, 2, "--addr"},
		{[]string{"--addr", "http://127.0.0.1:1"}, nil, 0, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, err := run(t, tc.vars, tc.args...)
			if got := cli.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			if tc.want != "" && !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Fatalf("error %v does not mention %q", err, tc.want)
			}
			if strings.Contains(fmt.Sprint(err)+errOut, "s3cret") {
				t.Fatalf("error %v (stderr %q) carries a password", err, errOut)
			}
			if tc.wantCode == 0 && !errors.Is(err, flag.ErrHelp) && err != nil {
				t.Fatal(err)
			}
			_ = errOut
		})
	}
}

func TestUnreachableServiceFailsClearly(t *testing.T) {
	addr := testkit.ClosedAddr(t)
	_, _, err := run(t, nil, "nodes", "--addr", "http://"+addr, "--timeout", "2s")
	if err == nil || cli.ExitCode(err) != 1 || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("err = %v, want an unavailable error with exit code 1", err)
	}
}
