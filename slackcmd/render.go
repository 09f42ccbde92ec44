package slackcmd

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/human"
	"github.com/llmdiag/llmdiag/report"
)

// Slack's limits on a message (Block Kit reference).
const (
	maxBlocks      = 50
	maxSectionText = 3000
	maxHeaderText  = 150
	maxFieldText   = 2000
	maxFields      = 10
	// maxFallback bounds the plain-text fallback; Slack cuts text at 40000
	// characters, and a notification needs far fewer.
	maxFallback = 3000
)

// Message is an answer: Slack's JSON for a slash command's response or a
// post to its response_url.
type Message struct {
	// ResponseType is always ephemeral (doc.go).
	ResponseType string `json:"response_type"`
	// Text is the fallback: notifications and clients without blocks.
	Text   string        `json:"text"`
	Blocks []slack.Block `json:"blocks"`
}

// encode is msg as JSON, with & < > as themselves (Slack reads them as
// escaped in the text already; \u003c would only make answers unreadable).
func encode(msg *Message) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(msg); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// message builds a Message within Slack's limits: blocks beyond the budget
// are replaced by one note saying how many were left out.
type message struct {
	text   string
	blocks []slack.Block
}

func (m *message) add(b ...slack.Block) { m.blocks = append(m.blocks, b...) }

func (m *message) done() *Message {
	blocks := m.blocks
	if len(blocks) > maxBlocks {
		left := len(blocks) - (maxBlocks - 1)
		blocks = append(slices.Clip(blocks[:maxBlocks-1]), contextBlock(fmt.Sprintf("_… %d more blocks left out (Slack shows at most %d)._", left, maxBlocks)))
	}
	return &Message{ResponseType: slack.ResponseTypeEphemeral, Text: truncate(m.text, maxFallback), Blocks: blocks}
}

// textMessage is a one-section answer.
func textMessage(s string) *Message {
	m := &message{text: s}
	m.add(section(s))
	return m.done()
}

// escape makes s literal in mrkdwn: & < > are Slack's control characters
// (links, mentions such as <!channel>).
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// code is s as inline code: escaped, with backticks (which would end it)
// replaced.
func code(s string) string { return "`" + strings.ReplaceAll(escape(s), "`", "'") + "`" }

// truncate cuts s to at most n characters, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// cutNote is appended to section text cut at Slack's limit.
const cutNote = "\n_… cut at Slack's 3000-character limit._"

func section(s string) *slack.SectionBlock {
	if utf8.RuneCountInString(s) > maxSectionText {
		s = truncate(s, maxSectionText-utf8.RuneCountInString(cutNote)) + cutNote
	}
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, s, false, false), nil, nil)
}

func header(s string) *slack.HeaderBlock {
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate(s, maxHeaderText), true, false))
}

func contextBlock(s string) *slack.ContextBlock {
	return slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, truncate(s, maxSectionText), false, false))
}

func fields(kv ...string) *slack.SectionBlock {
	var fs []*slack.TextBlockObject
	for i := 0; i+1 < len(kv) && len(fs) < maxFields; i += 2 {
		fs = append(fs, slack.NewTextBlockObject(slack.MarkdownType, truncate("*"+kv[i]+"*\n"+kv[i+1], maxFieldText), false, false))
	}
	return slack.NewSectionBlock(nil, fs, nil)
}

// lines packs title and lines into as few sections as Slack's text limit
// allows, at most budget sections; lines that do not fit are counted in a
// last line.
func lines(title string, ls []string, budget int) []slack.Block {
	var out []slack.Block
	var b strings.Builder
	b.WriteString(title)
	for i, l := range ls {
		l = truncate(l, maxSectionText-200)
		if b.Len() > 0 && utf8.RuneCountInString(b.String())+1+utf8.RuneCountInString(l) > maxSectionText-100 {
			if len(out)+1 >= budget {
				fmt.Fprintf(&b, "\n_… and %d more (Slack's message limits)._", len(ls)-i)
				out = append(out, section(b.String()))
				return out
			}
			out = append(out, section(b.String()))
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	if b.Len() > 0 {
		out = append(out, section(b.String()))
	}
	return out
}

// statusEmoji is a status as a coloured circle.
var statusEmoji = map[llmdiagv1.Status]string{
	llmdiagv1.Status_STATUS_UNSPECIFIED: ":white_circle:",
	llmdiagv1.Status_STATUS_OK:          ":large_green_circle:",
	llmdiagv1.Status_STATUS_WARN:        ":large_yellow_circle:",
	llmdiagv1.Status_STATUS_CRIT:        ":red_circle:",
	llmdiagv1.Status_STATUS_UNKNOWN:     ":white_circle:",
	llmdiagv1.Status_STATUS_DOWN:        ":black_circle:",
}

// words are the labels around a diagnosis in one language; the diagnosis
// itself comes in the language it was asked in.
type words struct {
	status                                          map[llmdiagv1.Status]string
	model, engine, load, routable, confidence, win  string
	yes, no, findings, evidence, recommendations    string
	ruledOut, stale, degraded, observed, fullReport string
	colon                                           string
	ago                                             func(time.Duration) string
}

var (
	english = words{
		status: map[llmdiagv1.Status]string{
			llmdiagv1.Status_STATUS_UNSPECIFIED: "UNKNOWN", llmdiagv1.Status_STATUS_OK: "OK", llmdiagv1.Status_STATUS_WARN: "WARN",
			llmdiagv1.Status_STATUS_CRIT: "CRIT", llmdiagv1.Status_STATUS_UNKNOWN: "UNKNOWN", llmdiagv1.Status_STATUS_DOWN: "DOWN",
		},
		model: "Model", engine: "Engine", load: "Load score", routable: "Routable", confidence: "Confidence", win: "Window",
		yes: "yes", no: "no", findings: "Findings", evidence: "Evidence", recommendations: "Recommendations",
		ruledOut: "Ruled out", stale: "Stale data: the verdict is UNKNOWN until fresh metrics arrive.",
		degraded: "Answered from this replica's copy", observed: "observed", fullReport: "full report: `llmdiag diagnose %s`",
		colon: ": ", ago: func(d time.Duration) string { return age(d) + " ago" },
	}
	chinese = words{
		status: map[llmdiagv1.Status]string{
			llmdiagv1.Status_STATUS_UNSPECIFIED: "未知", llmdiagv1.Status_STATUS_OK: "正常", llmdiagv1.Status_STATUS_WARN: "警告",
			llmdiagv1.Status_STATUS_CRIT: "严重", llmdiagv1.Status_STATUS_UNKNOWN: "未知", llmdiagv1.Status_STATUS_DOWN: "宕机",
		},
		model: "模型", engine: "引擎", load: "负载", routable: "可路由", confidence: "置信度", win: "窗口",
		yes: "是", no: "否", findings: "指标", evidence: "证据", recommendations: "建议",
		ruledOut: "已排除", stale: "数据已过期：在新指标到达之前结论为未知。",
		degraded: "由本副本的缓存副本回答", observed: "观测于", fullReport: "完整报告：`llmdiag diagnose %s --lang zh`",
		colon: "：", ago: func(d time.Duration) string {
			if d < time.Minute {
				return fmt.Sprintf("%.0f 秒前", d.Seconds())
			}
			return fmt.Sprintf("%.0f 分钟前", d.Minutes())
		},
	}
)

func wordsFor(lang llmdiagv1.Language) words {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return chinese
	}
	return english
}

// enumWord is an enum value's name without its prefix, in lower case:
// ENGINE_VLLM is "vllm".
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

func engineName(e llmdiagv1.Engine) string {
	if e == llmdiagv1.Engine_ENGINE_UNSPECIFIED {
		return "-"
	}
	return enumWord(e.String(), "ENGINE_")
}

// age is a duration as a person reads it: 3s, 2m10s.
func age(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// diagnoseMessage renders a DiagnoseNode answer: the header (node, status,
// cause), the summary with the node's figures, the findings one line each,
// the evidence and the recommendations; what was ruled out, the data's age
// and any degradation in small print.
func diagnoseMessage(r *llmdiagv1.DiagnoseNodeResponse) *Message {
	d := r.GetDiagnosis()
	lang := d.GetLanguage()
	w := wordsFor(lang)
	cause := diagnose.CauseName(d.GetRootCause(), lang)
	m := &message{}
	m.text = escape(fmt.Sprintf("%s · %s · %s: %s", d.GetNode(), w.status[d.GetStatus()], cause, d.GetSummary()))
	m.add(header(fmt.Sprintf("%s %s · %s · %s", statusEmoji[d.GetStatus()], d.GetNode(), w.status[d.GetStatus()], cause)))
	if d.GetSummary() != "" {
		m.add(section(escape(d.GetSummary())))
	}
	routable := w.no
	if d.GetRoutable() {
		routable = w.yes
	}
	m.add(fields(
		w.model, escape(cmp.Or(d.GetModel(), "-")),
		w.engine, engineName(d.GetEngine()),
		w.load, fmt.Sprintf("%.2f", d.GetLoadScore()),
		w.routable, routable,
		w.confidence, fmt.Sprintf("%.0f%%", d.GetConfidence()*100),
		w.win, escape(cmp.Or(d.GetWindow(), "-")),
	))
	var fl []string
	for _, f := range d.GetFindings() {
		st := w.status[f.GetStatus()]
		if f.GetValue() != "" {
			st += " (" + escape(f.GetValue()) + ")"
			if lang == llmdiagv1.Language_LANGUAGE_ZH {
				st = w.status[f.GetStatus()] + "（" + escape(f.GetValue()) + "）"
			}
		}
		fl = append(fl, fmt.Sprintf("%s *%s* · %s · %s", statusEmoji[f.GetStatus()], escape(f.GetName()), st, escape(f.GetConclusion())))
	}
	// Budget: header, summary, fields, evidence, recommendations, context
	// and the cut note leave the findings up to 40 sections.
	if len(fl) > 0 {
		m.add(slack.NewDividerBlock())
		m.add(lines("*"+w.findings+"*", fl, 40)...)
	}
	bullets := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		var ls []string
		for _, e := range items {
			ls = append(ls, "• "+escape(e))
		}
		m.add(lines("*"+title+"*", ls, 1)...)
	}
	bullets(w.evidence, d.GetEvidence())
	bullets(w.recommendations, d.GetRecommendations())
	var small []string
	if d.GetStale() {
		small = append(small, ":warning: "+w.stale)
	}
	if dg := r.GetDegraded(); dg != nil {
		small = append(small, fmt.Sprintf(":warning: %s (%s)%s%s", w.degraded, w.ago(dg.GetCopyAge().AsDuration()), w.colon, escape(dg.GetReason())))
	}
	if ro := d.GetRuledOut(); len(ro) > 0 {
		small = append(small, w.ruledOut+w.colon+escape(strings.Join(ro, " · ")))
	}
	foot := fmt.Sprintf(w.fullReport, escape(d.GetNode()))
	if d.GetObservedAt() != nil {
		foot = w.observed + " " + w.ago(d.GetStaleness().AsDuration()) + " · " + foot
	}
	small = append(small, foot)
	for _, s := range small {
		m.add(contextBlock(s))
	}
	return m.done()
}

// nodeLine is one node of a list: status, id, model, engine, load score
// and, when not healthy, the cause.
func nodeLine(n *llmdiagv1.Node) string {
	s := fmt.Sprintf("%s %s · %s · %s · load %.2f", statusEmoji[n.GetStatus()], code(n.GetId()), escape(cmp.Or(n.GetModel(), "-")), engineName(n.GetEngine()), n.GetLoadScore())
	if c := n.GetRootCause(); c != llmdiagv1.Cause_CAUSE_HEALTHY && c != llmdiagv1.Cause_CAUSE_UNSPECIFIED {
		s += " · " + diagnose.CauseName(c, llmdiagv1.Language_LANGUAGE_EN)
	}
	if !n.GetRoutable() {
		s += " · _not routable_"
	}
	return s
}

// counts is "1 WARN, 3 OK" over ns, worst first.
func counts(ns []*llmdiagv1.Node) string {
	by := map[llmdiagv1.Status]int{}
	for _, n := range ns {
		by[n.GetStatus()]++
	}
	var parts []string
	for _, s := range []llmdiagv1.Status{llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Status_STATUS_DOWN, llmdiagv1.Status_STATUS_WARN, llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Status_STATUS_OK} {
		if by[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[s], english.status[s]))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// listFoot is the small print of a node list: more pages, degradation.
func listFoot(m *message, r *llmdiagv1.ListNodesResponse) {
	if r.GetNextPageToken() != "" {
		m.add(contextBlock(fmt.Sprintf("Only the first %d nodes were read; `llmdiag nodes` lists them all.", len(r.GetNodes()))))
	}
	if dg := r.GetDegraded(); dg != nil {
		m.add(contextBlock(fmt.Sprintf(":warning: Answered from this replica's copy (%s ago): %s", age(dg.GetCopyAge().AsDuration()), escape(dg.GetReason()))))
	}
}

// nodesMessage renders the fleet, by node id.
func nodesMessage(r *llmdiagv1.ListNodesResponse) *Message {
	ns := r.GetNodes()
	m := &message{text: fmt.Sprintf("llmdiag fleet: %s (%s)", plural(len(ns), "node", "nodes"), counts(ns))}
	m.add(header("Fleet: " + plural(len(ns), "node", "nodes")))
	if len(ns) == 0 {
		m.add(section("No nodes yet: llmdiag has not read its fleet, or the fleet is empty."))
		return m.done()
	}
	var ls []string
	for _, n := range ns {
		ls = append(ls, nodeLine(n))
	}
	m.add(lines(counts(ns), ls, 45)...)
	listFoot(m, r)
	return m.done()
}

// unhealthyMessage renders the nodes not OK, worst first (report.Unhealthy).
func unhealthyMessage(r *llmdiagv1.ListNodesResponse) *Message {
	all := r.GetNodes()
	bad := report.Unhealthy(all)
	m := &message{}
	if len(bad) == 0 {
		m.text = fmt.Sprintf("llmdiag: no unhealthy nodes (%s, all OK)", plural(len(all), "node", "nodes"))
		if len(all) == 0 {
			m.text = "llmdiag: no nodes yet"
		}
		m.add(section(":large_green_circle: " + m.text + "."))
		listFoot(m, r)
		return m.done()
	}
	m.text = fmt.Sprintf("llmdiag: %s of %d not OK (%s)", plural(len(bad), "node", "nodes"), len(all), counts(bad))
	m.add(header(fmt.Sprintf("Unhealthy: %d of %d", len(bad), len(all))))
	var ls []string
	for _, n := range bad {
		ls = append(ls, nodeLine(n))
	}
	m.add(lines(counts(bad)+", worst first", ls, 45)...)
	listFoot(m, r)
	return m.done()
}

func quantileName(q float64) string { return "P" + strconv.FormatFloat(q*100, 'f', -1, 64) }

// metricTitle names a latency metric.
var metricTitle = map[llmdiagv1.LatencyMetric]string{
	llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT:                  "TTFT",
	llmdiagv1.LatencyMetric_LATENCY_METRIC_E2E:                   "E2E latency",
	llmdiagv1.LatencyMetric_LATENCY_METRIC_INTER_TOKEN:           "Inter-token latency",
	llmdiagv1.LatencyMetric_LATENCY_METRIC_TIME_PER_OUTPUT_TOKEN: "Time per output token",
	llmdiagv1.LatencyMetric_LATENCY_METRIC_QUEUE_TIME:            "Queue time",
}

// compareMessage renders a comparison as a ranked list: the rank at the
// highest quantile first, then each quantile's value with its bucket, ≈
// when within bucket resolution of the median, the tail ratio, and the
// outliers flagged; subjects without values last, with the service's note.
func compareMessage(c command, r *llmdiagv1.ComparePercentilesResponse) *Message {
	rows := slices.Clone(r.GetRows())
	rank := func(row *llmdiagv1.CompareRow) uint32 {
		vs := row.GetValues()
		if len(vs) == 0 || vs[len(vs)-1].GetRank() == 0 {
			return math.MaxUint32
		}
		return vs[len(vs)-1].GetRank()
	}
	slices.SortStableFunc(rows, func(a, b *llmdiagv1.CompareRow) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.GetSubject(), b.GetSubject()))
	})
	top := "-"
	if qs := r.GetQuantiles(); len(qs) > 0 {
		top = quantileName(qs[len(qs)-1])
	}
	title := metricTitle[r.GetMetric()]
	if title == "" {
		title = r.GetMetric().String()
	}
	by := strings.TrimPrefix(c.String(), "compare "+c.metricName+" ")
	m := &message{text: fmt.Sprintf("llmdiag: %s %s over %s", title, by, r.GetWindow())}
	m.add(header(fmt.Sprintf("%s %s · %s window", title, by, r.GetWindow())))
	var ls []string
	within := false
	for _, row := range rows {
		var vals []string
		for _, v := range row.GetValues() {
			p := v.GetPercentile()
			if math.IsNaN(p.GetValue()) {
				vals = append(vals, quantileName(p.GetQuantile())+" -")
				continue
			}
			s := fmt.Sprintf("%s %s (%s–%s)", quantileName(p.GetQuantile()), human.Seconds(p.GetValue()), human.Seconds(p.GetLowerBound()), human.Seconds(p.GetUpperBound()))
			if v.GetWithinResolution() {
				s += " ≈"
				within = true
			}
			vals = append(vals, s)
		}
		head := "*–*"
		if k := rank(row); k != math.MaxUint32 {
			head = fmt.Sprintf("*#%d*", k)
		}
		l := fmt.Sprintf("%s %s", head, code(row.GetSubject()))
		if len(vals) > 0 && rank(row) != math.MaxUint32 {
			l += " · " + strings.Join(vals, " · ")
			if row.GetTailRatio() > 0 {
				l += fmt.Sprintf(" · tail %.1f×", row.GetTailRatio())
			}
			l += fmt.Sprintf(" · %.0f requests", row.GetCount())
		}
		if row.GetOutlier() {
			l += " · :red_circle: *outlier*"
		}
		if row.GetNote() != "" {
			l += " · _" + escape(row.GetNote()) + "_"
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		m.add(section("Nothing to compare: no subjects."))
	} else {
		m.add(lines(fmt.Sprintf("Fastest first at %s; each value's histogram bucket in parentheses.", top), ls, 45)...)
	}
	var small []string
	if within {
		small = append(small, "≈ within bucket resolution: the median subject's value lies in the same bucket, so the histograms cannot tell the two apart; the rank is not a measured difference.")
	}
	small = append(small, fmt.Sprintf("Outlier: at least twice the median at %s. Data age %s.", top, age(r.GetStaleness().AsDuration())))
	if dg := r.GetDegraded(); dg != nil {
		small = append(small, fmt.Sprintf(":warning: Answered from this replica's copy (%s ago): %s", age(dg.GetCopyAge().AsDuration()), escape(dg.GetReason())))
	}
	for _, s := range small {
		m.add(contextBlock(s))
	}
	return m.done()
}

// helpMessage is the usage, after what was wrong when there was something.
func helpMessage(name, problem string) *Message {
	var b strings.Builder
	if problem != "" {
		fmt.Fprintf(&b, ":grey_question: %s.\n\n", escape(problem))
	}
	fmt.Fprintf(&b, "*llmdiag* diagnoses the inference fleet. Usage:\n")
	for _, u := range [][2]string{
		{"diagnose NODE [zh]", "the verdict on one node: status, root cause, evidence, what to do (`zh`: in Chinese)"},
		{"nodes", "every node with its status and load score"},
		{"unhealthy", "the nodes that are not OK, worst first"},
		{"compare METRIC [by model|engine|node|label KEY]", "rank a latency metric (ttft, e2e, itl, tpot or queue_time) across nodes, models, engines or a fleet label's values"},
		{"help", "this"},
	} {
		fmt.Fprintf(&b, "• `%s %s` — %s\n", name, u[0], u[1])
	}
	fmt.Fprintf(&b, "\nFor example `%s diagnose deepseek-v4-0` or `%s compare ttft by model`.", name, name)
	m := &message{text: strings.TrimSpace(b.String())}
	m.add(section(strings.TrimSpace(b.String())))
	return m.done()
}
