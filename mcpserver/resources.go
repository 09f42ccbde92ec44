package mcpserver

import (
	"bytes"
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Resource URIs.
const (
	// RunbooksURI prefixes the runbooks: RunbooksURI+slug in English,
	// RunbooksURI+"zh/"+slug in Chinese.
	RunbooksURI = "llmdiag://runbooks/"
	// ThresholdsURI is the thresholds in force, as YAML.
	ThresholdsURI = "llmdiag://thresholds"
)

// runbookURI is the URI of the runbook slug in lang.
func runbookURI(slug string, lang llmdiagv1.Language) string {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return RunbooksURI + "zh/" + slug
	}
	return RunbooksURI + slug
}

// addResources adds one resource per runbook (cause and language) and the
// thresholds, as opts has them.
func addResources(s *mcp.Server, opts Options) {
	if rb := opts.Runbooks; rb != nil {
		for _, c := range rb.Causes() {
			for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
				md, ok := rb.Markdown(c, lang)
				if !ok {
					continue
				}
				uri := runbookURI(rb.Slug(c), lang)
				s.AddResource(&mcp.Resource{URI: uri, Name: "runbook-" + langWord(lang) + "-" + rb.Slug(c), Title: rb.Title(c, lang),
					Description: "Runbook of root cause " + c.String() + " (" + langWord(lang) + "): what it means, how to confirm it, what to do.",
					MIMEType:    "text/markdown", Size: int64(len(md))},
					textResource(uri, "text/markdown", md))
			}
		}
	}
	if th := opts.Thresholds; th != nil {
		var b bytes.Buffer
		if err := diagnose.WriteThresholds(&b, *th); err != nil {
			// Only a key documented without a field fails, which
			// diagnose's tests catch: leave the resource out.
			opts.Log.Error("thresholds resource left out", "err", err)
			return
		}
		s.AddResource(&mcp.Resource{URI: ThresholdsURI, Name: "thresholds", Title: "Thresholds in force",
			Description: "Every threshold the verdicts compare against, as the YAML file `llmdiag thresholds` prints and `llmdiag serve --thresholds` reads.",
			MIMEType:    "application/yaml", Size: int64(b.Len())},
			textResource(ThresholdsURI, "application/yaml", b.String()))
	}
}

// textResource serves text, fixed when the server is built.
func textResource(uri, mime, text string) mcp.ResourceHandler {
	return func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
	}
}
