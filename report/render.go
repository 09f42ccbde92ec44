package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Render writes d as a report in format (Markdown when unspecified) with its
// labels in lang (the diagnosis's own language when unspecified). A nil
// diagnosis renders as an empty one: status UNKNOWN, no findings.
func Render(d *llmdiagv1.Diagnosis, format llmdiagv1.ReportFormat, lang llmdiagv1.Language) string {
	return newRenderer(d, lang).render(format)
}

func newRenderer(d *llmdiagv1.Diagnosis, lang llmdiagv1.Language) *renderer {
	if lang == llmdiagv1.Language_LANGUAGE_UNSPECIFIED {
		lang = d.GetLanguage()
	}
	return &renderer{d: d, l: newLabels(lang), lang: lang}
}

func (r *renderer) render(format llmdiagv1.ReportFormat) string {
	if format == llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT {
		return r.text()
	}
	return r.markdown()
}

type renderer struct {
	d    *llmdiagv1.Diagnosis
	l    labels
	lang llmdiagv1.Language
	// hole, when set, stands for the age in the facts line (Prepare).
	hole string
}

// title is "node · model · engine · role · window — STATUS", leaving out
// what is empty (the role of a node that does both).
func (r *renderer) title() string {
	var parts []string
	for _, p := range []string{r.d.GetNode(), r.d.GetModel(), fleet.EngineDisplayName(r.d.GetEngine()), roleName(r.d.GetRole(), r.lang), r.d.GetWindow()} {
		if p = oneLine(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " · ") + " — " + r.l.status[r.d.GetStatus()]
}

// facts is the line under the title: routable, load, confidence, when
// observed and how long ago.
func (r *renderer) facts() []string {
	l := r.l
	yn := l.no
	if r.d.GetRoutable() {
		yn = l.yes
	}
	fs := []string{
		l.routable + l.colon + yn,
		l.load + l.colon + strconv.FormatFloat(r.d.GetLoadScore(), 'f', 2, 64),
		l.confidence + l.colon + strconv.FormatFloat(r.d.GetConfidence(), 'f', 2, 64),
	}
	if ts := r.d.GetObservedAt(); ts != nil {
		obs := ts.AsTime().UTC().Format(time.DateTime) + " UTC"
		if r.hole != "" {
			obs = l.withValue(obs, l.ago(r.hole))
		} else if s := r.d.GetStaleness(); s != nil {
			obs = l.withValue(obs, l.ago(diagnose.FormatDuration(s.AsDuration(), r.lang)))
		}
		fs = append(fs, l.observed+l.colon+obs)
	}
	if r.d.GetStale() {
		fs = append(fs, l.stale)
	}
	return fs
}

// statusCell is the status word with the value: "OK (~30%)".
func (r *renderer) statusCell(f *llmdiagv1.Finding) string {
	s := r.l.status[f.GetStatus()]
	if v := oneLine(f.GetValue()); v != "" {
		return r.l.withValue(s, v)
	}
	return s
}

// sections are the lists under the root cause, in order, with their titles.
func (r *renderer) sections() []struct {
	title string
	items []string
} {
	return []struct {
		title string
		items []string
	}{
		{r.l.evidence, r.d.GetEvidence()},
		{r.l.ruledOut, r.d.GetRuledOut()},
		{r.l.recs, r.d.GetRecommendations()},
	}
}

func (r *renderer) markdown() string {
	var b strings.Builder
	l := r.l
	fmt.Fprintf(&b, "## %s\n\n", r.title())
	b.WriteString(strings.Join(r.facts(), " · ") + "\n\n")

	if fs := r.d.GetFindings(); len(fs) > 0 {
		fmt.Fprintf(&b, "| %s | %s | %s |\n|---|---|---|\n", l.indicator, l.statusCol, l.conclusion)
		for _, f := range fs {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(f.GetName()), cell(r.statusCell(f)), cell(f.GetConclusion()))
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "### %s%s%s\n\n", l.rootCause, l.colon, l.cause(r.d.GetRootCause()))
	if s := oneLine(r.d.GetSummary()); s != "" {
		b.WriteString(s + "\n\n")
	}
	for _, sec := range r.sections() {
		if len(sec.items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "**%s**\n\n", sec.title)
		for _, it := range sec.items {
			fmt.Fprintf(&b, "- %s\n", oneLine(it))
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func (r *renderer) text() string {
	var b strings.Builder
	l := r.l
	b.WriteString(r.title() + "\n")
	b.WriteString(strings.Join(r.facts(), "   ") + "\n\n")

	if fs := r.d.GetFindings(); len(fs) > 0 {
		rows := [][]string{{l.indicator, l.statusCol, l.conclusion}}
		for _, f := range fs {
			rows = append(rows, []string{oneLine(f.GetName()), r.statusCell(f), oneLine(f.GetConclusion())})
		}
		writeColumns(&b, rows, 3)
		b.WriteString("\n")
	}

	b.WriteString(l.rootCause + l.colon + l.cause(r.d.GetRootCause()) + "\n")
	if s := oneLine(r.d.GetSummary()); s != "" {
		b.WriteString("  " + s + "\n")
	}
	for _, sec := range r.sections() {
		if len(sec.items) == 0 {
			continue
		}
		b.WriteString("\n" + sec.title + "\n")
		for _, it := range sec.items {
			b.WriteString("  - " + oneLine(it) + "\n")
		}
	}
	return b.String()
}

// oneLine folds any line breaks and runs of white space into single spaces:
// text from outside must not break a table row or a list item.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell is s made safe for a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }
