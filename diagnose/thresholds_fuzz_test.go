package diagnose

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzLoadThresholds: a thresholds file either loads into thresholds that
// validate and that WriteThresholds prints as a file loading back to the
// same thresholds, or is refused with an error that says it is about the
// thresholds (and, for a key, names it).
func FuzzLoadThresholds(f *testing.F) {
	for _, p := range []string{"../deploy/base/thresholds.yaml", "../deploy/helm/llmdiag/files/thresholds.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var def bytes.Buffer
	if err := WriteThresholds(&def, DefaultThresholds()); err != nil {
		f.Fatal(err)
	}
	f.Add(def.Bytes())
	for _, s := range []string{
		"", "~", "- a", "kv_warn: 0.95\nkv_crit: 0.9\n", "stale_after: 5\n", "stale_after: \"-1s\"\n", "kv_warn: .nan\n",
		"nope: 1\n", "kv_warn: 0.8\nkv_warn: 0.8\n", "? [a]\n: 1\n", "queue_saturated: 1e400\n",
		"slos:\n  - name: ttft-2s\n    metric: ttft\n    target: \"2s\"\n    objective: 0.99\n    period: \"28d\"\n" +
			"  - name: itl-deepseek\n    metric: inter_token\n    target: \"100ms\"\n    objective: 0.995\n    period: \"30d\"\n    model: deepseek-v4\n",
		"slos:\n  - metric: e2e\n    target: \"0s\"\n    objective: 1\n    period: \"1d\"\n",
		"slos: 3\n", "slos:\n  - 1\n", "slos: []\nslos: []\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		th, err := LoadThresholds(bytes.NewReader(data))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "thresholds: ") && !strings.HasPrefix(msg, "invalid thresholds: ") {
				t.Fatalf("error does not say it is about the thresholds: %v", err)
			}
			return
		}
		if err := th.Validate(); err != nil {
			t.Fatalf("loaded thresholds do not validate: %v", err)
		}
		var out bytes.Buffer
		if err := WriteThresholds(&out, th); err != nil {
			t.Fatalf("write loaded thresholds: %v", err)
		}
		again, err := LoadThresholds(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("written thresholds do not load: %v\n%s", err, out.Bytes())
		}
		var out2 bytes.Buffer
		if err := WriteThresholds(&out2, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("round trip changed the thresholds:\n%s\n---\n%s", out.Bytes(), out2.Bytes())
		}
	})
}
