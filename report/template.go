package report

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Template is a report rendered once with a hole where the one part that
// changes as time passes goes: the data's age ("observed … (3 s ago)").
// A service that answers the same diagnosis many times renders it once
// and fills in the age per answer.
type Template struct {
	before, after string
	lang          llmdiagv1.Language
	holed         bool
	// last is the last text filled in: the age reads the same for a
	// second or more, and answers between share it.
	last atomic.Pointer[filled]
}

type filled struct{ age, text string }

// hole marks the age while rendering a Template: no label, value or
// escaping produces a NUL.
const hole = "\x00"

// Prepare renders d as Render does, leaving the age as a hole; d's own
// staleness is not used. Without an observation time the report has no age
// and the Template is the whole report.
func Prepare(d *llmdiagv1.Diagnosis, format llmdiagv1.ReportFormat, lang llmdiagv1.Language) *Template {
	r := newRenderer(d, lang)
	r.hole = hole
	before, after, found := strings.Cut(r.render(format), hole)
	return &Template{before: before, after: after, lang: r.lang, holed: found}
}

// Text is the report of a diagnosis whose staleness is age: what Render
// writes for it. It is safe for concurrent use.
func (t *Template) Text(age time.Duration) string {
	if !t.holed {
		return t.before
	}
	a := diagnose.FormatDuration(age, t.lang)
	if f := t.last.Load(); f != nil && f.age == a {
		return f.text
	}
	text := t.before + a + t.after
	t.last.Store(&filled{a, text})
	return text
}

// Size is the bytes the Template holds.
func (t *Template) Size() int {
	if t == nil {
		return 0
	}
	return len(t.before) + len(t.after)
}
