package alerts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/slack-go/slack"
	"google.golang.org/protobuf/encoding/protojson"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Bounds on what a message carries, whatever the verdict holds.
const (
	maxEvidence        = 10
	maxRecommendations = 5
	maxItemRunes       = 300
	maxSlackText       = 3000 // Block Kit's limit for a section's text
	maxSlackHeader     = 150  // and for a header's
)

// textFormats are the bodies of the text sink, and each chat tool's limit
// on the text, in bytes.
var textFormats = map[string]int{
	"feishu":   20000, // {"msg_type":"text","content":{"text":…}}
	"dingtalk": 20000, // {"msgtype":"text","text":{"content":…}}
	"wecom":    2048,  // {"msgtype":"text","text":{"content":…}}
}

func statusName(s llmdiagv1.Status) string { return strings.TrimPrefix(s.String(), "STATUS_") }
func causeName(c llmdiagv1.Cause) string   { return strings.TrimPrefix(c.String(), "CAUSE_") }

// truncate cuts s to n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// truncateBytes cuts s to n bytes at a rune boundary, marking the cut.
func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func firstN(xs []string, n int) []string {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

// title is "FIRING LLMDiagOverloaded on glm-4.6-0".
func title(n *Notification) string {
	name := n.Alert.Labels["alertname"]
	if name == "" {
		name = "alert"
	}
	t := strings.ToUpper(n.Alert.Status) + " " + name
	if n.Node != "" {
		t += " on " + n.Node
	} else if inst := n.Alert.Labels["instance"]; inst != "" {
		t += " on " + inst
	}
	return t
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func slackLink(u, text string) string {
	return "<" + strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C").Replace(u) + "|" + slackEscape(text) + ">"
}

func bullets(xs []string, max int) string {
	var b strings.Builder
	for _, x := range firstN(xs, max) {
		b.WriteString("• " + slackEscape(truncate(x, maxItemRunes)) + "\n")
	}
	if len(xs) > max {
		fmt.Fprintf(&b, "… and %d more\n", len(xs)-max)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// slackMessage is an incoming webhook's body: a fallback text (shown in
// notifications) and the blocks.
type slackMessage struct {
	Text   string        `json:"text"`
	Blocks []slack.Block `json:"blocks"`
}

// RenderSlack renders n as a Slack incoming-webhook message in Block Kit:
// a header (status, alert, node), the verdict (status and root cause),
// node and alert fields, the summary, the evidence and recommendations as
// bullets, and links to the runbook and the alert's source.
func RenderSlack(n *Notification) ([]byte, error) {
	mrkdwn := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.MarkdownType, truncate(s, maxSlackText), false, false)
	}
	var blocks []slack.Block
	blocks = append(blocks, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate(title(n), maxSlackHeader), false, false)))
	d := n.Diagnosis
	alertField := "*Alert*\n" + slackEscape(n.Alert.Labels["alertname"])
	if sev := n.Alert.Labels["severity"]; sev != "" {
		alertField += " · " + slackEscape(sev)
	}
	alertField += " · " + n.Alert.Status + " since " + n.Alert.StartsAt.UTC().Format(time.RFC3339)
	fallback := title(n)
	if d != nil {
		node := "*Node*\n" + slackEscape(n.Node)
		if d.GetModel() != "" {
			node += " (" + slackEscape(d.GetModel()) + ")"
		}
		verdict := fmt.Sprintf("*Verdict*\n%s · %s", statusName(d.GetStatus()), causeName(d.GetRootCause()))
		if d.GetStale() {
			verdict += " (stale)"
		}
		blocks = append(blocks, slack.NewSectionBlock(nil, []*slack.TextBlockObject{mrkdwn(verdict), mrkdwn(node), mrkdwn(alertField),
			mrkdwn(fmt.Sprintf("*Routable*\n%t · load %.2f", d.GetRoutable(), d.GetLoadScore()))}, nil))
		if s := d.GetSummary(); s != "" {
			blocks = append(blocks, slack.NewSectionBlock(mrkdwn(slackEscape(s)), nil, nil))
		}
		if len(d.GetEvidence()) > 0 {
			blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Evidence*\n"+bullets(d.GetEvidence(), maxEvidence)), nil, nil))
		}
		if len(d.GetRecommendations()) > 0 {
			blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Recommendations*\n"+bullets(d.GetRecommendations(), maxRecommendations)), nil, nil))
		}
		fallback += fmt.Sprintf(": %s %s — %s", statusName(d.GetStatus()), causeName(d.GetRootCause()), d.GetSummary())
	} else {
		blocks = append(blocks, slack.NewSectionBlock(nil, []*slack.TextBlockObject{mrkdwn(alertField)}, nil))
		if s := n.Alert.Annotations["summary"]; s != "" {
			blocks = append(blocks, slack.NewSectionBlock(mrkdwn(slackEscape(s)), nil, nil))
		}
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("_"+slackEscape(n.Note)+"_"), nil, nil))
		fallback += ": " + n.Note
	}
	var links []string
	if n.RunbookURL != "" && d != nil {
		links = append(links, slackLink(n.RunbookURL, "Runbook: "+causeName(d.GetRootCause())))
	}
	if u := n.Alert.Annotations["runbook_url"]; u != "" && u != n.RunbookURL {
		links = append(links, slackLink(u, "Alert runbook"))
	}
	if u := n.Alert.GeneratorURL; u != "" {
		links = append(links, slackLink(u, "Source"))
	}
	if len(links) > 0 {
		blocks = append(blocks, slack.NewContextBlock("", mrkdwn(strings.Join(links, " · "))))
	}
	return marshal(slackMessage{Text: truncate(fallback, maxSlackText), Blocks: blocks})
}

// jsonMessage is the generic JSON sink's body.
type jsonMessage struct {
	// Version of this body's format.
	Version     string          `json:"version"`
	Receiver    string          `json:"receiver,omitempty"`
	GroupKey    string          `json:"groupKey,omitempty"`
	ExternalURL string          `json:"externalURL,omitempty"`
	Alert       any             `json:"alert"`
	Node        string          `json:"node,omitempty"`
	Note        string          `json:"note,omitempty"`
	RunbookURL  string          `json:"runbookURL,omitempty"`
	Diagnosis   json.RawMessage `json:"diagnosis,omitempty"`
}

// JSONVersion is the version of RenderJSON's format.
const JSONVersion = "1"

// RenderJSON renders n as one JSON object: version ("1"), receiver,
// groupKey and externalURL of the Alertmanager message, the alert as
// Alertmanager sent it, node (the llmdiag node id), note (why there is no
// verdict), runbookURL and diagnosis (llmdiag.v1.Diagnosis in protojson,
// as the Connect JSON API answers it).
func RenderJSON(n *Notification) ([]byte, error) {
	m := jsonMessage{Version: JSONVersion, Receiver: n.Receiver, GroupKey: n.GroupKey, ExternalURL: n.ExternalURL,
		Alert: n.Alert, Node: n.Node, Note: n.Note, RunbookURL: n.RunbookURL}
	if n.Diagnosis != nil {
		d, err := protojson.Marshal(n.Diagnosis)
		if err != nil {
			return nil, err
		}
		m.Diagnosis = d // json.Marshal compacts it: stable bytes
	}
	return marshal(m)
}

// RenderText renders n as plain text in Chinese inside the body the chat
// tool's incoming webhook takes:
//
//	feishu:          {"msg_type":"text","content":{"text":"…"}}
//	dingtalk, wecom: {"msgtype":"text","text":{"content":"…"}}
//
// The text starts with 【llmdiag】 (a DingTalk robot's keyword can be
// "llmdiag") and is cut to the tool's limit (WeCom: 2048 bytes).
func RenderText(n *Notification, format string) ([]byte, error) {
	limit, ok := textFormats[format]
	if !ok {
		return nil, fmt.Errorf("text format %q: want feishu, dingtalk or wecom", format)
	}
	text := truncateBytes(plainText(n), limit)
	switch format {
	case "feishu":
		return marshal(map[string]any{"msg_type": "text", "content": map[string]string{"text": text}})
	default:
		return marshal(map[string]any{"msgtype": "text", "text": map[string]string{"content": text}})
	}
}

func plainText(n *Notification) string {
	var b strings.Builder
	state := "告警触发"
	if n.Alert.Status == "resolved" {
		state = "告警恢复"
	}
	name := n.Alert.Labels["alertname"]
	fmt.Fprintf(&b, "【llmdiag】%s：%s", state, name)
	if sev := n.Alert.Labels["severity"]; sev != "" {
		fmt.Fprintf(&b, "（%s）", sev)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "开始时间：%s\n", n.Alert.StartsAt.UTC().Format(time.RFC3339))
	d := n.Diagnosis
	if d == nil {
		if inst := n.Alert.Labels["instance"]; inst != "" {
			fmt.Fprintf(&b, "实例：%s\n", inst)
		}
		if s := n.Alert.Annotations["summary"]; s != "" {
			fmt.Fprintf(&b, "告警摘要：%s\n", s)
		}
		fmt.Fprintf(&b, "说明：%s\n", n.Note)
	} else {
		fmt.Fprintf(&b, "节点：%s", n.Node)
		if d.GetModel() != "" {
			fmt.Fprintf(&b, "（%s）", d.GetModel())
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "诊断：%s · %s", statusName(d.GetStatus()), causeName(d.GetRootCause()))
		if d.GetStale() {
			b.WriteString("（数据陈旧）")
		}
		b.WriteString("\n")
		if s := d.GetSummary(); s != "" {
			fmt.Fprintf(&b, "摘要：%s\n", s)
		}
		list := func(head string, xs []string, max int) {
			if len(xs) == 0 {
				return
			}
			b.WriteString(head + "：\n")
			for _, x := range firstN(xs, max) {
				b.WriteString("- " + truncate(x, maxItemRunes) + "\n")
			}
			if len(xs) > max {
				fmt.Fprintf(&b, "- ……另有 %d 条\n", len(xs)-max)
			}
		}
		list("证据", d.GetEvidence(), maxEvidence)
		list("建议", d.GetRecommendations(), maxRecommendations)
		if n.RunbookURL != "" {
			fmt.Fprintf(&b, "运行手册：%s\n", n.RunbookURL)
		}
	}
	if u := n.Alert.Annotations["runbook_url"]; u != "" && u != n.RunbookURL {
		fmt.Fprintf(&b, "告警运行手册：%s\n", u)
	}
	if u := n.Alert.GeneratorURL; u != "" {
		fmt.Fprintf(&b, "来源：%s\n", u)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// marshal is json.Marshal without the escaping of <, > and & (the bodies
// are not HTML, and Slack's links read better as they are).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// The notes a notification carries instead of a verdict.

func noteIndex(lang llmdiagv1.Language) string {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return "llmdiag 无法读取节点列表，未附诊断。"
	}
	return "llmdiag could not read its node list, so no verdict is attached."
}

func noteUnmatched(lang llmdiagv1.Language, m match, labels []string) string {
	zh := lang == llmdiagv1.Language_LANGUAGE_ZH
	if m.label == "" {
		if zh {
			return fmt.Sprintf("告警未指明节点（无 %s 标签），未附 llmdiag 诊断。", strings.Join(labels, "、"))
		}
		return fmt.Sprintf("The alert names no node (no %s label), so no llmdiag verdict is attached.", strings.Join(labels, " or "))
	}
	if zh {
		return fmt.Sprintf("llmdiag 不认识节点 %s=%q，未附诊断。", m.label, m.value)
	}
	return fmt.Sprintf("llmdiag knows no node %s=%q, so no verdict is attached.", m.label, m.value)
}

func noteDiagnoseFailed(lang llmdiagv1.Language, node string, err error) string {
	why := connect.CodeOf(err).String()
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Message() != "" {
		why += ": " + truncate(ce.Message(), 200)
	}
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return fmt.Sprintf("llmdiag 无法诊断 %s（%s），未附诊断。", node, why)
	}
	return fmt.Sprintf("llmdiag could not diagnose %s (%s), so no verdict is attached.", node, why)
}
