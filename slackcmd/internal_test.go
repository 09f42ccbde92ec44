package slackcmd

import (
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestAllowed: only URLs under the prefix's scheme, host and path receive
// answers, however the URL is dressed up.
func TestAllowed(t *testing.T) {
	for _, prefix := range []string{"https://hooks.slack.com/", "https://hooks.slack.com"} {
		h, err := New(Config{Service: stubService{}, Secret: func() (string, error) { return "s", nil }, ResponseURLPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			url string
			ok  bool
		}{
			{"https://hooks.slack.com/commands/T0001/1234/abcd", true},
			{"https://HOOKS.slack.com/commands/T0001/1234/abcd", true},
			{"https://hooks.slack.com.evil.example/commands/x", false},
			{"https://evil.example/https://hooks.slack.com/x", false},
			{"https://evil.example/?u=https://hooks.slack.com/", false},
			{"http://hooks.slack.com/commands/x", false},
			{"https://user@hooks.slack.com/commands/x", false},
			{"https://hooks.slack.com@evil.example/commands/x", false},
			{"https://hooks.slack.com:8443/commands/x", false},
			{"https://hooks.slack.com/commands/../../x", false},
			{"https://hooks.slack.com/commands/%2e%2e/x", false},
			{"//hooks.slack.com/commands/x", false},
			{"hooks.slack.com/commands/x", false},
			{"", false},
		} {
			_, err := h.allowed(tc.url)
			if (err == nil) != tc.ok {
				t.Errorf("prefix %s: allowed(%q) = %v, want ok %v", prefix, tc.url, err, tc.ok)
			}
		}
		h.Close()
	}
}

// TestParse: the command grammar, and help with the problem for the rest.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		text, want, problem string
	}{
		{"", "help", ""},
		{"  help ", "help", ""},
		{"diagnose deepseek-v4-0", "diagnose deepseek-v4-0", ""},
		{"Diagnose deepseek-v4-0 ZH", "diagnose deepseek-v4-0 zh", ""},
		{"diagnose deepseek-v4-0 en", "diagnose deepseek-v4-0", ""},
		{"diagnose", "help", "`diagnose` needs a node"},
		{"diagnose a b", "help", "`diagnose` takes a node and optionally `zh`"},
		{"nodes", "nodes", ""},
		{"nodes all", "help", "`nodes` takes no arguments"},
		{"unhealthy", "unhealthy", ""},
		{"compare ttft by model", "compare ttft by model", ""},
		{"compare TTFT", "compare ttft by node", ""},
		{"compare itl by engine", "compare itl by engine", ""},
		{"compare e2e by label team", "compare e2e by label team", ""},
		{"compare e2e by label=team", "compare e2e by label team", ""},
		{"compare e2e by label __name__", "help", "`by label` takes one label name (letters, digits and _)"},
		{"compare", "help", "`compare` needs a metric: ttft, e2e, itl, tpot or queue_time"},
		{"compare speed", "help", "unknown metric `speed`: want ttft, e2e, itl, tpot or queue_time"},
		{"compare ttft for model", "help", "`compare ttft` takes `by model`, `by engine`, `by node` or `by label KEY`"},
		{"compare ttft by model extra", "help", "`by model` takes nothing after it"},
		{"reboot", "help", "unknown command `reboot`"},
	} {
		c := parse(tc.text)
		if c.String() != tc.want || c.problem != tc.problem {
			t.Errorf("parse(%q) = %q (problem %q), want %q (problem %q)", tc.text, c.String(), c.problem, tc.want, tc.problem)
		}
	}
	if c := parse("compare ttft by model"); c.metric != llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT || c.group != llmdiagv1.GroupBy_GROUP_BY_MODEL {
		t.Errorf("compare ttft by model: %+v", c)
	}
}

type stubService struct{ Service }
