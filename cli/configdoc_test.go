package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	_ "github.com/llmdiag/llmdiag/internal/testing/testkit" // defines -update
)

// configDoc is the page whose reference part is serve's --help.
var configDoc = filepath.Join("..", "docs", "configuration.md")

// The generated part of configDoc lies between these lines.
const (
	configDocBegin = "<!-- BEGIN GENERATED: llmdiag serve --help -->\n"
	configDocEnd   = "<!-- END GENERATED -->\n"
)

// TestConfigurationDoc: docs/configuration.md holds, between its marker
// lines, `llmdiag serve --help` exactly as the program prints it, so a
// flag added or changed without regenerating the page fails here. make
// docs runs it with -update, which rewrites that part alone and keeps the
// prose around it.
func TestConfigurationDoc(t *testing.T) {
	var help bytes.Buffer
	err := cli.Run(context.Background(), []string{"serve", "--help"}, cli.Env{Getenv: func(string) string { return "" }, Stdout: &help, Stderr: &help})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve --help: %v", err)
	}
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := spliceGenerated(string(doc), "```text\n"+strings.TrimRight(help.String(), "\n")+"\n```\n")
	if err != nil {
		t.Fatalf("%s: %v", configDoc, err)
	}
	if got == string(doc) {
		return
	}
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" { // testkit's -update
		if err := os.WriteFile(configDoc, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is not serve's --help as the flags give it now: run make docs (and commit the page)", configDoc)
}

// spliceGenerated replaces what lies between the marker lines of doc with
// generated.
func spliceGenerated(doc, generated string) (string, error) {
	begin := strings.Index(doc, configDocBegin)
	if begin < 0 {
		return "", errors.New("no line " + strings.TrimSpace(configDocBegin))
	}
	begin += len(configDocBegin)
	end := strings.Index(doc[begin:], configDocEnd)
	if end < 0 {
		return "", errors.New("no line " + strings.TrimSpace(configDocEnd) + " after " + strings.TrimSpace(configDocBegin))
	}
	return doc[:begin] + generated + doc[begin+end:], nil
}
