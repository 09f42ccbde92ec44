package openapidoc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmdiag/llmdiag/internal/openapidoc"
)

// TestFinish: doubles of the component schemas (not the query
// parameters: a request sends a number) become oneOf a number and the
// strings protojson writes for NaN and infinities; descriptions lose the
// space proto comments leave; the bearer scheme is declared and required.
func TestFinish(t *testing.T) {
	in, err := os.ReadFile("testdata/generated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/finished.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := openapidoc.Finish(in)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("finished document (-want +got):\n%s", d)
	}
	again, err := openapidoc.Finish(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(got) {
		t.Error("two runs on the same input differ")
	}
}

func TestFinishRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not YAML", "a: [", "read the generated document"},
		{"not a mapping", "- a\n- b\n", "not a YAML mapping"},
		{"no schemas", "openapi: 3.0.3\npaths: {}\n", "no components.schemas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := openapidoc.Finish([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
