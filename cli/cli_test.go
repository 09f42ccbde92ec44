package cli_test

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

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
		{[]string{"serve", "--discovery", "/nonexistent/discovery.yaml"}, nil, 2, "read discovery file"},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/bad-scrape-interval.yaml"}, nil, 2, `key "scrape_interval" is not supported by llmdiag`},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/ok-file-sd.yaml", "--target", "a=http://127.0.0.1:1/metrics"}, nil, 2, "--discovery goes with neither --fleet nor --target"},
		{[]string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--readiness-gate", "llmdiag.io/routable"}, nil, 2, "--readiness-gate needs the Kubernetes API"},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/ok-file-sd.yaml", "--readiness-gate", "llmdiag.io/routable", "--max-unready-fraction", "1.5"}, nil, 2, "--max-unready-fraction"},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/ok-file-sd.yaml", "--readiness-gate", "llmdiag.io/routable", "--readiness-gate-lease", "nolease"}, nil, 2, "NAMESPACE/NAME"},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/ok-file-sd.yaml", "--readiness-gate", "llmdiag.io/routable", "--readiness-gate-qps", "0"}, nil, 2, "--readiness-gate-qps"},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/ok-file-sd.yaml", "--readiness-gate", "routable"}, nil, 2, "domain-prefixed"},
		{[]string{"serve", "--discovery", "../fleetsd/testdata/config/ok-file-sd.yaml", "--readiness-gate", "llmdiag.io/routable", "--readiness-gate-kubeconfig", "/nonexistent"}, nil, 2, "--readiness-gate-kubeconfig"},
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
			_, errOut, err := clitest.Run(t, tc.vars, tc.args...)
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
	_, _, err := clitest.Run(t, nil, "nodes", "--addr", "http://"+addr, "--timeout", "2s")
	if err == nil || cli.ExitCode(err) != 1 || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("err = %v, want an unavailable error with exit code 1", err)
	}
}
