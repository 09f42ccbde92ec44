package runbook_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/runbook"
)

var langs = []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH}

// causeRecs are the recommendations (entries of diagnose's catalog) each
// cause's verdict can give, which its runbook must quote under "What to
// do". Where a recommendation can join any verdict (GPU faults, the roles
// of a disaggregated deployment), it is listed under the causes whose
// runbooks deal with it.
var causeRecs = map[llmdiagv1.Cause][]string{
	llmdiagv1.Cause_CAUSE_NO_DATA:      {"recNoData", "recNoDataRouting"},
	llmdiagv1.Cause_CAUSE_TARGET_DOWN:  {"recDown", "recDownRouting"},
	llmdiagv1.Cause_CAUSE_KV_EXHAUSTED: {"recKVShed", "recKVShedPreempt", "recKVCapacity", "recKVContext"},
	llmdiagv1.Cause_CAUSE_OVERLOADED:   {"recShed", "recAddCapacity", "recOverloadTP", "recAdmission"},
	llmdiagv1.Cause_CAUSE_BURST:        {"recBurstKeep", "recBurstSmooth", "recBurstHeadroom"},
	llmdiagv1.Cause_CAUSE_PREFILL_BOUND: {"recChunkedPrefill", "recPrefixCache", "recDisaggregate", "recAddPrefillWorkers",
		"recPrefillWorkers", "recKVTransfer", "recKVFailures"},
	llmdiagv1.Cause_CAUSE_DECODE_BOUND: {"recTensorParallel", "recTPAlready", "recConcurrency", "recSpeculative",
		"recClientTimeout", "recProfile", "recSpecDraft", "recChunkedPrefill", "recSmallerChunks",
		"recGPUBandwidth", "recGPUStarved", "recGPUCPUStalls", "recGPUCompute"},
	llmdiagv1.Cause_CAUSE_NODE_OUTLIER: {"recOutlierDrain", "recOutlierCompare", "recGPUThrottle", "recGPUXID", "recGPUXIDApp", "recGPUXIDCheck"},
	llmdiagv1.Cause_CAUSE_HEALTHY:      {"recNone"},
	llmdiagv1.Cause_CAUSE_UNEXPLAINED: {"recKVWatch", "recPreemptWatch", "recGroupSlow", "recLatency", "recITL",
		"recAborts", "recTrend", "recQueueTime", "recScrape", "recConcurrency", "recChunkedPrefill",
		"recOutlierCompare", "recGPUThrottle", "recGPUXID", "recGPUXIDApp", "recGPUXIDCheck", "recPrefillWorkers", "recKVTransfer", "recKVFailures",
		"recWatch"},
	llmdiagv1.Cause_CAUSE_STALLED:         {"recStalledRouting", "recStalledDump", "recStalledRestart", "recStalledProbe"},
	llmdiagv1.Cause_CAUSE_LORA_CONTENTION: {"recLoRAMaxLoras", "recLoRARoute"},
}

// causeFiles are diagnose's files of one cause (or two: cause_healthy.go
// decides HEALTHY and UNEXPLAINED), whose recommendations must all be
// listed in causeRecs for it.
var causeFiles = map[string][]llmdiagv1.Cause{
	"cause_burst.go":      {llmdiagv1.Cause_CAUSE_BURST},
	"cause_decode.go":     {llmdiagv1.Cause_CAUSE_DECODE_BOUND},
	"cause_healthy.go":    {llmdiagv1.Cause_CAUSE_HEALTHY, llmdiagv1.Cause_CAUSE_UNEXPLAINED},
	"cause_kv.go":         {llmdiagv1.Cause_CAUSE_KV_EXHAUSTED},
	"cause_lora.go":       {llmdiagv1.Cause_CAUSE_LORA_CONTENTION},
	"cause_outlier.go":    {llmdiagv1.Cause_CAUSE_NODE_OUTLIER},
	"cause_overloaded.go": {llmdiagv1.Cause_CAUSE_OVERLOADED},
	"cause_prefill.go":    {llmdiagv1.Cause_CAUSE_PREFILL_BOUND},
	"cause_stalled.go":    {llmdiagv1.Cause_CAUSE_STALLED},
}

// catalog reads the recommendations of diagnose's message catalog from its
// source (diagnose/messages.go): entry name → English and Chinese format.
func catalog(t *testing.T) map[string][2]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "diagnose", "messages.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][2]string)
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok || !strings.HasPrefix(key.Name, "rec") {
			return true
		}
		lit, ok := kv.Value.(*ast.CompositeLit)
		if !ok || len(lit.Elts) != 2 {
			t.Fatalf("messages.go: catalog entry %s is not {en, zh}", key.Name)
		}
		var texts [2]string
		for i, e := range lit.Elts {
			b, ok := e.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				t.Fatalf("messages.go: catalog entry %s: not a string literal", key.Name)
			}
			texts[i], _ = strconv.Unquote(b.Value)
		}
		out[key.Name] = texts
		return false
	})
	if len(out) < 30 {
		t.Fatalf("messages.go: read only %d recommendations from the catalog; has its shape changed?", len(out))
	}
	return out
}

// verb matches a format verb of the catalog: %s, %d, %[2]s.
var verb = regexp.MustCompile(`%(\[[1-9]\])?[sd]`)

// pattern matches format text in a runbook: its verbs stand for any words,
// its spaces for any white space.
func pattern(format string) *regexp.Regexp {
	parts := verb.Split(format, -1)
	for i, p := range parts {
		fields := strings.Fields(p)
		for j, f := range fields {
			fields[j] = regexp.QuoteMeta(f)
		}
		parts[i] = strings.Join(fields, `\s+`)
		if strings.HasPrefix(p, " ") && i > 0 {
			parts[i] = `\s+` + parts[i]
		}
		if strings.HasSuffix(p, " ") && i < len(parts)-1 {
			parts[i] += `\s+`
		}
	}
	return regexp.MustCompile(strings.Join(parts, `\S.*?`))
}

// section is the text of the "## heading" section of md, without Markdown
// code and emphasis marks; ok is false when md has no such section.
func section(md, heading string) (string, bool) {
	_, rest, ok := strings.Cut(md, "\n## "+heading+"\n")
	if !ok {
		return "", false
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return strings.NewReplacer("`", "", "**", "").Replace(rest), true
}

// TestRecommendationsQuoted checks that each runbook quotes, under "What to
// do", every recommendation its cause's verdict can give, in its language,
// and that causeRecs covers every recommendation of the catalog and of each
// cause's file, so that a new or changed recommendation fails here until
// its runbook follows.
func TestRecommendationsQuoted(t *testing.T) {
	cat := catalog(t)
	listed := make(map[string]bool)
	for c, recs := range causeRecs {
		for _, r := range recs {
			if _, ok := cat[r]; !ok {
				t.Errorf("%v: %s is no recommendation of diagnose's catalog", c, r)
			}
			listed[r] = true
		}
	}
	for r := range cat {
		if !listed[r] {
			t.Errorf("diagnose's recommendation %s is in no runbook: add it to causeRecs and quote it in the runbook of the causes that give it", r)
		}
	}
	for file, causes := range causeFiles {
		for _, r := range recsUsed(t, file, cat) {
			if !slices.ContainsFunc(causes, func(c llmdiagv1.Cause) bool { return slices.Contains(causeRecs[c], r) }) {
				t.Errorf("diagnose/%s gives %s, which causeRecs does not list for %v", file, r, causes)
			}
		}
	}
	heading := map[llmdiagv1.Language]string{llmdiagv1.Language_LANGUAGE_EN: "What to do", llmdiagv1.Language_LANGUAGE_ZH: "处理"}
	for _, c := range runbook.Causes() {
		for i, lang := range langs {
			md, _ := runbook.Markdown(c, lang)
			todo, ok := section(md, heading[lang])
			if !ok {
				t.Errorf("%s (%v): no section %q", runbook.Slug(c), lang, heading[lang])
				continue
			}
			for _, r := range causeRecs[c] {
				if !pattern(cat[r][i]).MatchString(todo) {
					t.Errorf("%s (%v): %q does not quote %s:\n  %s", runbook.Slug(c), lang, heading[lang], r, cat[r][i])
				}
			}
		}
	}
}

// recsUsed are the recommendations of cat that file (in diagnose) names.
func recsUsed(t *testing.T, file string, cat map[string][2]string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "diagnose", file), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && !slices.Contains(out, id.Name) {
			if _, isRec := cat[id.Name]; isRec {
				out = append(out, id.Name)
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Errorf("diagnose/%s names no recommendation; is causeFiles out of date?", file)
	}
	return out
}

// TestEveryCause checks that every cause but UNSPECIFIED has a runbook in
// both languages, titled as reports title the cause, naming its enum value
// and with the three parts: what it means, how to confirm, what to do.
func TestEveryCause(t *testing.T) {
	var want []llmdiagv1.Cause
	for n := int32(1); n < int32(len(llmdiagv1.Cause_name)); n++ {
		want = append(want, llmdiagv1.Cause(n))
	}
	if got := runbook.Causes(); !slices.Equal(got, want) {
		t.Fatalf("Causes() = %v, want every cause but UNSPECIFIED in enum order %v", got, want)
	}
	confirm := map[llmdiagv1.Language]string{llmdiagv1.Language_LANGUAGE_EN: "Confirm", llmdiagv1.Language_LANGUAGE_ZH: "确认"}
	for _, c := range want {
		for _, lang := range langs {
			md, ok := runbook.Markdown(c, lang)
			if !ok {
				t.Errorf("%v: no runbook in %v", c, lang)
				continue
			}
			if got, want := runbook.Title(c, lang), diagnose.CauseName(c, lang); got != want {
				t.Errorf("%v (%v): title %q, want the cause's name in reports, %q", c, lang, got, want)
			}
			if !strings.Contains(md, "`"+c.String()+"`") {
				t.Errorf("%v (%v): the runbook does not name `%v`", c, lang, c)
			}
			if _, ok := section(md, confirm[lang]); !ok {
				t.Errorf("%v (%v): no section %q", c, lang, confirm[lang])
			}
			if !strings.HasPrefix(md, "# ") {
				t.Errorf("%v (%v): does not start with its title", c, lang)
			}
		}
	}
	if _, ok := runbook.Markdown(llmdiagv1.Cause_CAUSE_UNSPECIFIED, llmdiagv1.Language_LANGUAGE_EN); ok {
		t.Error("CAUSE_UNSPECIFIED has a runbook")
	}
	en, _ := runbook.Markdown(llmdiagv1.Cause_CAUSE_OVERLOADED, llmdiagv1.Language_LANGUAGE_EN)
	unspecified, _ := runbook.Markdown(llmdiagv1.Cause_CAUSE_OVERLOADED, llmdiagv1.Language_LANGUAGE_UNSPECIFIED)
	if en != unspecified {
		t.Error("LANGUAGE_UNSPECIFIED does not give the English runbook")
	}
}

// link matches a Markdown link's target.
var link = regexp.MustCompile(`\]\(([^)]*)\)`)

// TestLinks checks that the runbooks link only to one another, by file
// name (<slug>.md beside them), which works in the repository and which the
// handler serves as the page in the same language.
func TestLinks(t *testing.T) {
	slugs := make(map[string]bool)
	for _, c := range runbook.Causes() {
		slugs[runbook.Slug(c)] = true
	}
	links := 0
	for _, c := range runbook.Causes() {
		for _, lang := range langs {
			md, _ := runbook.Markdown(c, lang)
			for _, m := range link.FindAllStringSubmatch(md, -1) {
				links++
				if slug, ok := strings.CutSuffix(m[1], ".md"); !ok || !slugs[slug] {
					t.Errorf("%s (%v): link %q: want another runbook's file, <slug>.md", runbook.Slug(c), lang, m[1])
				}
			}
		}
	}
	if links == 0 {
		t.Error("no links found: has the pattern broken?")
	}
}
