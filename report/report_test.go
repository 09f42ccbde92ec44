package report_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/report"
)

var htmlTag = regexp.MustCompile(`<[A-Za-z/!]`)

var (
	en       = llmdiagv1.Language_LANGUAGE_EN
	zh       = llmdiagv1.Language_LANGUAGE_ZH
	markdown = llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN
	text     = llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT
)

func seed(lang llmdiagv1.Language) *llmdiagv1.Diagnosis {
	return diagnose.Diagnose(diagnosetest.SeedInput(), diagnose.DefaultThresholds(), lang)
}

// TestSeedReports renders the acceptance case in both formats and both
// languages and compares each with its golden file.
func TestSeedReports(t *testing.T) {
	for _, tc := range []struct {
		file   string
		format llmdiagv1.ReportFormat
		lang   llmdiagv1.Language
		want   []string
	}{
		{"seed.en.md", markdown, en, []string{
			"| Indicator | Status | Conclusion |",
			"| KV cache pressure | OK (~30%) | Memory is not the bottleneck |",
			"| E2E P99 | WARN (13.3 min (bucket 480 s–960 s)) | Long tail under high concurrency |",
			"### Root cause: Decode-bound",
		}},
		{"seed.zh.md", markdown, zh, []string{
			"| 指标 | 状态 | 结论 |",
			"| KV Cache 压力 | 正常（~30%） | 显存不是瓶颈 |",
			"| Generation Token Rate | 警告（121 tok/s） | Decode 慢，但符合模型特性 |",
			"### 根本原因：Decode 瓶颈",
			"不是显存不够、不是请求排队，而是",
		}},
		{"seed.en.txt", text, en, []string{"Root cause: Decode-bound", "Memory is not the bottleneck"}},
		{"seed.zh.txt", text, zh, []string{"根本原因：Decode 瓶颈", "显存不是瓶颈"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := report.Render(seed(tc.lang), tc.format, tc.lang)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			if htmlTag.MatchString(got) {
				t.Errorf("report contains %q: no HTML in chat tools", htmlTag.FindString(got))
			}
			testkit.Golden(t, filepath.Join("testdata", tc.file), []byte(got))
		})
	}
}

// TestTextColumnsAlign checks that every row's status and conclusion start at
// the same terminal column, Chinese double-width characters included.
func TestTextColumnsAlign(t *testing.T) {
	for _, lang := range []llmdiagv1.Language{en, zh} {
		d := seed(lang)
		out := report.Render(d, text, lang)
		var starts []int
		for _, line := range strings.Split(out, "\n") {
			for _, f := range d.GetFindings() {
				if strings.HasPrefix(line, f.GetName()+" ") {
					i := strings.Index(line, f.GetConclusion())
					starts = append(starts, termWidth(line[:i]))
				}
			}
		}
		if len(starts) != len(d.GetFindings()) {
			t.Fatalf("%v: found %d table rows, want %d:\n%s", lang, len(starts), len(d.GetFindings()), out)
		}
		for _, s := range starts {
			if s != starts[0] {
				t.Errorf("%v: conclusions start at columns %v, want one column:\n%s", lang, starts, out)
				break
			}
		}
	}
}

// termWidth counts CJK and full-width characters as two columns.
func termWidth(s string) int {
	w := 0
	for _, r := range s {
		if r >= 0x2E80 && r <= 0x9FFF || r >= 0xFF00 && r <= 0xFF60 {
			w += 2
		} else {
			w++
		}
	}
	return w
}

// TestUntrustedText checks that text from outside cannot break the layout.
func TestUntrustedText(t *testing.T) {
	d := &llmdiagv1.Diagnosis{
		Node:     "node-a",
		Status:   llmdiagv1.Status_STATUS_WARN,
		Summary:  "line one\nline two",
		Evidence: []string{"error: “a | b\n| c”"},
		Findings: []*llmdiagv1.Finding{{
			Name: "Scrape", Value: "1 | 2", Status: llmdiagv1.Status_STATUS_WARN, Conclusion: "x\n| y |",
		}},
	}
	md := report.Render(d, markdown, en)
	if !strings.Contains(md, `| Scrape | WARN (1 \| 2) | x \| y \| |`) {
		t.Errorf("table cell not escaped:\n%s", md)
	}
	if !strings.Contains(md, "line one line two") || !strings.Contains(md, "- error: “a | b | c”") {
		t.Errorf("line breaks not folded:\n%s", md)
	}
}

func TestDefaults(t *testing.T) {
	d := seed(zh)
	if got, want := report.Render(d, llmdiagv1.ReportFormat_REPORT_FORMAT_UNSPECIFIED, llmdiagv1.Language_LANGUAGE_UNSPECIFIED),
		report.Render(d, markdown, zh); got != want {
		t.Error("unspecified format and language should mean Markdown in the diagnosis's language")
	}
	for _, f := range []llmdiagv1.ReportFormat{markdown, text} {
		if out := report.Render(nil, f, en); !strings.Contains(out, "UNKNOWN") {
			t.Errorf("nil diagnosis rendered as %q", out)
		}
	}
}

// TestTemplateIsRender: a Prepared report with its age filled in is what
// Render writes for the diagnosis with that staleness, in both formats and
// languages, for ages that format differently; without an observation time
// there is no age to fill.
func TestTemplateIsRender(t *testing.T) {
	for _, lang := range []llmdiagv1.Language{en, zh} {
		for _, format := range []llmdiagv1.ReportFormat{markdown, text} {
			d := seed(lang)
			if d.GetObservedAt() == nil {
				t.Fatal("the seed diagnosis has no observation time: nothing to fill")
			}
			tmpl := report.Prepare(d, format, lang)
			for _, age := range []time.Duration{0, 1500 * time.Millisecond, 42 * time.Second, 3*time.Minute + 5*time.Second, 26 * time.Hour} {
				d.Staleness = durationpb.New(age)
				want := report.Render(d, format, lang)
				for range 2 { // filled in, then reused
					if got := tmpl.Text(age); got != want {
						t.Errorf("%v %v age %v:\n got %q\nwant %q", lang, format, age, got, want)
					}
				}
			}
			d.ObservedAt, d.Staleness = nil, durationpb.New(time.Minute)
			if got, want := report.Prepare(d, format, lang).Text(time.Minute), report.Render(d, format, lang); got != want {
				t.Errorf("%v %v without observed_at:\n got %q\nwant %q", lang, format, got, want)
			}
		}
	}
}
