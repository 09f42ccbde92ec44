package runbook

import (
	"embed"
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// files holds the runbooks: en/<slug>.md and zh/<slug>.md.
//
//go:embed en/*.md zh/*.md
var files embed.FS

// Slug is the runbook name of cause c, its enum name without the CAUSE_
// prefix, in lower case with dashes: CAUSE_KV_EXHAUSTED is "kv-exhausted".
// It is "" for CAUSE_UNSPECIFIED and values outside the enum.
func Slug(c llmdiagv1.Cause) string {
	name, ok := llmdiagv1.Cause_name[int32(c)]
	if !ok || c == llmdiagv1.Cause_CAUSE_UNSPECIFIED {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "CAUSE_")), "_", "-")
}

// Causes are the causes with a runbook, in enum order.
func Causes() []llmdiagv1.Cause {
	var out []llmdiagv1.Cause
	for n := int32(1); n < int32(len(llmdiagv1.Cause_name)); n++ {
		c := llmdiagv1.Cause(n)
		if _, ok := Markdown(c, llmdiagv1.Language_LANGUAGE_EN); ok {
			out = append(out, c)
		}
	}
	return out
}

// bySlug is the cause of a runbook slug; ok is false for no runbook.
func bySlug(slug string) (llmdiagv1.Cause, bool) {
	for _, c := range Causes() {
		if Slug(c) == slug {
			return c, true
		}
	}
	return 0, false
}

// langDir is the directory of lang's runbooks: English unless Chinese.
func langDir(lang llmdiagv1.Language) string {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return "zh"
	}
	return "en"
}

// Markdown is the runbook of cause c in lang (LANGUAGE_UNSPECIFIED is
// English); ok is false when c has no runbook.
func Markdown(c llmdiagv1.Cause, lang llmdiagv1.Language) (string, bool) {
	slug := Slug(c)
	if slug == "" {
		return "", false
	}
	b, err := files.ReadFile(langDir(lang) + "/" + slug + ".md")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Title is the runbook's title, its first "# " heading, in lang; "" when c
// has no runbook.
func Title(c llmdiagv1.Cause, lang llmdiagv1.Language) string {
	md, ok := Markdown(c, lang)
	if !ok {
		return ""
	}
	for line := range strings.Lines(md) {
		if t, ok := strings.CutPrefix(line, "# "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}
