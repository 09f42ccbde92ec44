package cli_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

// --fields asks the service for those fields only (read_mask): the JSON
// printed holds them and nothing else; it goes with --format json only,
// and a path the service does not know is refused naming it.
func TestFields(t *testing.T) {
	url := benchServer(t)
	keys := func(t *testing.T, raw json.RawMessage) []string {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		args []string
		// pick is where the resource lies in the answer.
		pick func(t *testing.T, out string) []json.RawMessage
		want []string
	}{
		{[]string{"nodes", "--format", "json", "--fields", "id,routable"}, func(t *testing.T, out string) []json.RawMessage {
			var r struct{ Nodes []json.RawMessage }
			if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Nodes) != 2 {
				t.Fatalf("%v, %d nodes: %s", err, len(r.Nodes), out)
			}
			return r.Nodes
		}, []string{"id", "routable"}},
		{[]string{"metrics", "b-node", "--format", "json", "--fields", "node,up"}, func(t *testing.T, out string) []json.RawMessage {
			var r struct{ Metrics json.RawMessage }
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			return []json.RawMessage{r.Metrics}
		}, []string{"node", "up"}},
		{[]string{"diagnose", "b-node", "--format", "json", "--fields", "node,staleness"}, func(t *testing.T, out string) []json.RawMessage {
			var r map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &r); err != nil || r["report"] != nil {
				t.Fatalf("%v, report %s", err, r["report"])
			}
			return []json.RawMessage{r["diagnosis"]}
		}, []string{"node", "staleness"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, err := clitest.Run(t, nil, append(tc.args, "--addr", url)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			for _, r := range tc.pick(t, out) {
				if got := keys(t, r); !slices.Equal(got, tc.want) {
					t.Errorf("fields %v, want %v", got, tc.want)
				}
			}
		})
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"nodes", "--fields", "id"}, 2, "--fields id: only with --format json"},
		{[]string{"diagnose", "b-node", "--format", "markdown", "--fields", "report"}, 2, "only with --format json"},
		{[]string{"metrics", "b-node", "--format", "json", "--fields", "up,nope"}, 1, `read_mask: path "nope" is not a field of llmdiag.v1.NodeMetrics`},
	} {
		_, _, err := clitest.Run(t, nil, append(tc.args, "--addr", url)...)
		if err == nil || cli.ExitCode(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v: %v (exit %d), want exit %d saying %q", tc.args, err, cli.ExitCode(err), tc.code, tc.says)
		}
	}
}
