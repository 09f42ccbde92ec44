package slackcmd

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmdiag/llmdiag/fleet"
)

// FuzzParseForm reads arbitrary bytes as the form of a slash command, as
// ServeHTTP does once the signature is checked. A command that parses
// prints as text that parses back to the same command; anything else is
// help whose problem (when the text was valid UTF-8) is valid UTF-8 too.
// The slash command's name is Slack's when it looks like one, else
// /llmdiag, and the answer renders as JSON.
func FuzzParseForm(f *testing.F) {
	for _, text := range []string{
		"", "help", "diagnose deepseek-v4-0", "Diagnose deepseek-v4-0 ZH", "diagnose glm-0 en", "diagnose", "diagnose a b",
		"nodes", "nodes all", "unhealthy", "compare ttft by model", "compare e2e by label team", "compare itl by label=team",
		"compare ttft by label bad-name", "compare", "compare nope", "compare ttft by", "compare ttft by gpu", "compare ttft by node x",
		"diagnose " + strings.Repeat("x", 300), "frobnicate " + strings.Repeat("é", 50), "\u00a0diagnose\u3000x",
	} {
		f.Add("token=x&team_id=T0001&command=%2Fllmdiag&text=" + url.QueryEscape(text) + "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT0001%2F1%2Fx")
	}
	f.Add("command=/LLMDIAG&text=nodes")
	f.Add("command=%2F" + strings.Repeat("a", 40) + "&text=help")
	f.Add("text=%zz")
	f.Add("text=a;b")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return // ServeHTTP answers 400
		}
		text := form.Get("text")
		c := parse(text)
		switch c.kind {
		case kindHelp:
			if utf8.ValidString(text) && !utf8.ValidString(c.problem) {
				t.Fatalf("parse(%q): problem %q is not valid UTF-8", text, c.problem)
			}
		case kindDiagnose:
			if c.node == "" || len(c.node) > maxNodeID || strings.ContainsFunc(c.node, func(r rune) bool { return strings.ContainsRune(" \t\n", r) }) {
				t.Fatalf("parse(%q): node %q", text, c.node)
			}
		case kindCompare:
			if c.label != "" && !fleet.ValidLabelName(c.label) {
				t.Fatalf("parse(%q): label %q", text, c.label)
			}
		case kindNodes, kindUnhealthy:
		default:
			t.Fatalf("parse(%q): kind %q", text, c.kind)
		}
		if c.kind != kindHelp {
			if again := parse(c.String()); again != c {
				t.Fatalf("parse(%q) = %+v prints as %q, which parses as %+v", text, c, c.String(), again)
			}
		}
		name := commandName(form.Get("command"))
		if name != form.Get("command") && name != "/llmdiag" || !slashName.MatchString(name) {
			t.Fatalf("commandName(%q) = %q", form.Get("command"), name)
		}
		if c.kind == kindHelp {
			msg := helpMessage(name, c.problem)
			if msg.Text == "" {
				t.Fatalf("parse(%q): help without text", text)
			}
			if _, err := json.Marshal(msg); err != nil {
				t.Fatalf("parse(%q): help does not encode: %v", text, err)
			}
		}
	})
}
