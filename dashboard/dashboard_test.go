package dashboard_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmdiag/llmdiag/dashboard"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/promrules"
)

func write(t *testing.T, cfg dashboard.Config) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := dashboard.Write(&b, cfg); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// load decodes dashboard JSON into the SDK's type, as Grafana's own
// schema reads it.
func load(t *testing.T, data []byte) sdk.Dashboard {
	t.Helper()
	plugins.RegisterDefaultPlugins() // the SDK's decoder of panel and query types
	var d sdk.Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the JSON does not load into the SDK's dashboard type: %v", err)
	}
	return d
}

var configs = []struct {
	file string
	cfg  dashboard.Config
}{
	{"default.json", dashboard.Config{}},
	{"pod-1m.json", dashboard.Config{NodeLabel: "pod", Window: time.Minute, Datasource: "prom-main", Title: "LLM fleet", UID: "llm-fleet"}},
}

func TestGolden(t *testing.T) {
	for _, tc := range configs {
		t.Run(tc.file, func(t *testing.T) {
			testkit.Golden(t, filepath.Join("testdata", tc.file), write(t, tc.cfg))
		})
	}
}

// TestLoadsBack: the JSON decodes into the SDK's dashboard type and encodes
// back to the same bytes, with the same queries.
func TestLoadsBack(t *testing.T) {
	for _, tc := range configs {
		t.Run(tc.file, func(t *testing.T) {
			data := write(t, tc.cfg)
			d := load(t, data)
			again, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(again, '\n'), data) {
				t.Errorf("loaded and encoded again, the dashboard differs:\n%s", again)
			}
			built, err := dashboard.Build(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := dashboard.Queries(built)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dashboard.Queries(d)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) || len(got) < 30 {
				t.Errorf("queries of the loaded dashboard (%d):\n%v\nof the built one (%d):\n%v", len(got), got, len(want), want)
			}
			ids := map[uint32]string{}
			for _, p := range d.Panels {
				id, title := uint32(0), ""
				switch {
				case p.Panel != nil && p.Panel.Id != nil:
					id, title = *p.Panel.Id, *p.Panel.Title
				case p.RowPanel != nil && p.RowPanel.Id != 0:
					id, title = p.RowPanel.Id, *p.RowPanel.Title
				default:
					t.Errorf("a panel without an id: %+v", p)
					continue
				}
				if other, dup := ids[id]; dup {
					t.Errorf("panels %q and %q share id %d", other, title, id)
				}
				ids[id] = title
			}
		})
	}
}

// TestQueriesReadTheRules: every query parses once its variables are
// filled in, filters by the model and node variables where it reads a
// fleet record, and every llmdiag:… name it reads is a record `llmdiag
// rules` writes with the same node label and window.
func TestQueriesReadTheRules(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for _, tc := range configs {
		t.Run(tc.file, func(t *testing.T) {
			d, err := dashboard.Build(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			qs, err := dashboard.Queries(d)
			if err != nil {
				t.Fatal(err)
			}
			rules, _, err := promrules.Build(promrules.Config{Thresholds: diagnose.DefaultThresholds(), NodeLabel: tc.cfg.NodeLabel, Window: tc.cfg.Window})
			if err != nil {
				t.Fatal(err)
			}
			recorded := map[string]bool{"ALERTS": true}
			for _, r := range rules.Groups[0].Rules {
				if r.Record != "" {
					recorded[r.Record] = true
				}
			}
			node := tc.cfg.NodeLabel
			if node == "" {
				node = "instance"
			}
			fleet := 0
			for _, q := range qs {
				expr := dashboard.ForPrometheus(q.Expr, 15*time.Second)
				if strings.Contains(expr, "$") {
					t.Errorf("%s %s: a variable left after substitution: %s", q.Panel, q.RefID, expr)
				}
				e, err := p.ParseExpr(expr)
				if err != nil {
					t.Errorf("%s %s: %v\n%s", q.Panel, q.RefID, err, expr)
					continue
				}
				readsRecord := false
				parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
					vs, ok := n.(*parser.VectorSelector)
					if !ok {
						return nil
					}
					if strings.HasPrefix(vs.Name, "llmdiag:") || vs.Name == "ALERTS" {
						readsRecord = true
						if !recorded[vs.Name] {
							t.Errorf("%s %s: reads %s, which the rules do not record", q.Panel, q.RefID, vs.Name)
						}
						if q.Label == "" && (!strings.Contains(vs.String(), node+`=~".*"`) || !strings.Contains(vs.String(), `model=~".*"`)) {
							t.Errorf("%s %s: %s not filtered by node and model", q.Panel, q.RefID, vs)
						}
					} else if !strings.HasPrefix(vs.Name, "llmdiag_") {
						t.Errorf("%s %s: reads %s, neither a record nor llmdiag's own metric", q.Panel, q.RefID, vs.Name)
					}
					return nil
				})
				if readsRecord {
					fleet++
				}
			}
			if fleet < 15 {
				t.Errorf("%d queries read the rules' records, want the 15 or more of the status, load and latency rows", fleet)
			}
		})
	}
}

// TestThresholdLines: the panels draw the thresholds given.
func TestThresholdLines(t *testing.T) {
	th := diagnose.DefaultThresholds()
	th.KVWarn, th.KVCrit = 0.81, 0.93
	th.TTFTP99Warn = 1234 * time.Millisecond
	out := string(write(t, dashboard.Config{Thresholds: &th}))
	for _, want := range []string{`"value": 0.81,`, `"value": 0.93,`, `"value": 1.234,`} {
		if !strings.Contains(out, want) {
			t.Errorf("no threshold step %s", want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	bad := diagnose.DefaultThresholds()
	bad.KVWarn = 2
	for _, tc := range []struct {
		name string
		cfg  dashboard.Config
		want string
	}{
		{"node label", dashboard.Config{NodeLabel: "a-b"}, `node label "a-b"`},
		{"window", dashboard.Config{Window: time.Millisecond}, "window 1ms"},
		{"datasource control", dashboard.Config{Datasource: "prom\nx"}, "datasource: control characters"},
		{"datasource long", dashboard.Config{Datasource: strings.Repeat("x", 201)}, "datasource: longer than 200"},
		{"uid", dashboard.Config{UID: "a b"}, `uid "a b"`},
		{"title", dashboard.Config{Title: "a\tb"}, "title"},
		{"thresholds", dashboard.Config{Thresholds: &bad}, "thresholds: kv_warn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dashboard.Build(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestForPrometheus(t *testing.T) {
	got := dashboard.ForPrometheus(`rate(x{pod=~"$node", model=~"${model}"}[$__rate_interval]) + y[$__interval]`, 20*time.Second)
	if want := `rate(x{pod=~".*", model=~".*"}[20s]) + y[20s]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
