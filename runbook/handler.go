package runbook

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	gmtext "github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/llmdiag/llmdiag/auth"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// style is the pages' only styling, inline: the Content-Security-Policy
// allows exactly this block by its hash, and nothing else (no scripts, no
// images, no fonts, no frames).
const style = `body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1f2328}
code,pre{font-family:ui-monospace,monospace;font-size:90%;background:#f6f8fa}
pre{padding:.75rem;overflow-x:auto}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.25rem .5rem}
nav{font-size:90%;margin-bottom:1rem}a{color:#0969da}`

// page is the HTML around a rendered runbook or the index.
var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="{{.Lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{.Style}}</style>
</head>
<body>
<nav><a href="{{.Index}}">{{.IndexText}}</a> · <a href="{{.Other}}" hreflang="{{.OtherLang}}">{{.OtherText}}</a></nav>
<main>
{{.Body}}
</main>
</body>
</html>
`))

// pageData fills page.
type pageData struct {
	Lang, Title      string
	Style            template.CSS
	Index, IndexText string
	Other, OtherLang string
	OtherText        string
	Body             template.HTML
}

// handler serves the runbooks; pages are rendered once, at first use.
type handler struct {
	csp   string
	once  sync.Once
	pages map[string][]byte // "<lang>/<slug>" ("<lang>/" for the index) → page
	err   error
}

// Handler serves the runbooks under auth.RunbooksPrefix: the prefix itself
// is an index, <prefix><slug> a runbook as HTML, in Chinese with ?lang=zh
// (English with no lang or lang=en). Unknown slugs are 404, another lang
// 400, methods other than GET and HEAD 405. Pages carry a strict
// Content-Security-Policy (no scripts; only the page's own inline style)
// and X-Content-Type-Options: nosniff.
func Handler() http.Handler {
	sum := sha256.Sum256([]byte(style))
	return &handler{
		csp: "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed: runbooks answer GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	lang := "en"
	switch q := r.URL.Query().Get("lang"); q {
	case "", "en":
	case "zh":
		lang = "zh"
	default:
		http.Error(w, "lang: want en or zh", http.StatusBadRequest)
		return
	}
	slug, ok := strings.CutPrefix(r.URL.Path, auth.RunbooksPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	h.once.Do(h.render)
	if h.err != nil {
		http.Error(w, "runbooks: "+h.err.Error(), http.StatusInternalServerError)
		return
	}
	b, ok := h.pages[lang+"/"+slug]
	if !ok {
		http.Error(w, "no runbook "+slug+"; the index is at "+auth.RunbooksPrefix, http.StatusNotFound)
		return
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "public, max-age=300")
	w.Write(b) //nolint:errcheck // the client went away; nothing to do
}

// render renders every page into h.pages.
func (h *handler) render() {
	pages := make(map[string][]byte)
	for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
		dir := langDir(lang)
		md := goldmark.New(
			goldmark.WithExtensions(extension.Table, extension.NewCJK(extension.WithEastAsianLineBreaks())),
			goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(runbookLinks{lang}, 100))),
		)
		var index strings.Builder
		index.WriteString("<h1>" + template.HTMLEscapeString(text(lang, "llmdiag runbooks", "llmdiag 运行手册")) + "</h1>\n<ul>\n")
		for _, c := range Causes() {
			src, ok := Markdown(c, lang)
			if !ok {
				continue
			}
			var body bytes.Buffer
			if err := md.Convert([]byte(src), &body); err != nil {
				h.err = err
				return
			}
			slug := Slug(c)
			b, err := h.page(lang, Title(c, lang), slug, template.HTML(body.String())) //nolint:gosec // goldmark's output; it drops raw HTML
			if err != nil {
				h.err = err
				return
			}
			pages[dir+"/"+slug] = b
			index.WriteString(`<li><a href="` + link(slug, lang) + `">` + template.HTMLEscapeString(Title(c, lang)) + "</a></li>\n")
		}
		index.WriteString("</ul>\n")
		b, err := h.page(lang, text(lang, "llmdiag runbooks", "llmdiag 运行手册"), "", template.HTML(index.String())) //nolint:gosec // built above from escaped text
		if err != nil {
			h.err = err
			return
		}
		pages[dir+"/"] = b
	}
	h.pages = pages
}

// page wraps body; slug is "" for the index.
func (h *handler) page(lang llmdiagv1.Language, title, slug string, body template.HTML) ([]byte, error) {
	other := llmdiagv1.Language_LANGUAGE_ZH
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		other = llmdiagv1.Language_LANGUAGE_EN
	}
	target := slug
	if target == "" {
		target = "./"
	}
	var b bytes.Buffer
	err := page.Execute(&b, pageData{
		Lang: langDir(lang), Title: title, Style: template.CSS(style),
		Index: link("./", lang), IndexText: text(lang, "All runbooks", "全部运行手册"),
		Other: link(target, other), OtherLang: langDir(other), OtherText: text(other, "English", "中文"),
		Body: body,
	})
	return b.Bytes(), err
}

// runbookLinks turns the runbooks' links to one another, <slug>.md (the
// file beside them, so that they work in the repository too), into the
// served page in the same language.
type runbookLinks struct{ lang llmdiagv1.Language }

// linkFile matches a link to another runbook's file.
var linkFile = regexp.MustCompile(`^([a-z][a-z-]*)\.md$`)

func (r runbookLinks) Transform(doc *ast.Document, _ gmtext.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if l, ok := n.(*ast.Link); ok && entering {
			if m := linkFile.FindSubmatch(l.Destination); m != nil {
				l.Destination = []byte(link(string(m[1]), r.lang))
			}
		}
		return ast.WalkContinue, nil
	})
}

// link is the relative address of slug ("./" for the index) in lang, from
// any page under the prefix.
func link(slug string, lang llmdiagv1.Language) string {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return slug + "?lang=zh"
	}
	return slug
}

// text is en or zh by lang.
func text(lang llmdiagv1.Language, en, zh string) string {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return zh
	}
	return en
}
