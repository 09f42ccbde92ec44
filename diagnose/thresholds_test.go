package diagnose_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/diagnose"
)

func TestDefaultThresholdsValid(t *testing.T) {
	if err := diagnose.DefaultThresholds().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestThresholdsYAML(t *testing.T) {
	th := diagnose.DefaultThresholds()
	doc := "kv_warn: 0.85\nttft_p99_warn: 5s\nqueue_crit_for: 2m\nmin_peers: 3\n"
	if err := yaml.Unmarshal([]byte(doc), &th); err != nil {
		t.Fatal(err)
	}
	if th.KVWarn != 0.85 || th.TTFTP99Warn != 5*time.Second || th.QueueCritFor != 2*time.Minute || th.MinPeers != 3 {
		t.Errorf("overrides not applied: %+v", th)
	}
	if th.KVCrit != 0.95 || th.QueueSaturated != 5 {
		t.Errorf("keys left out lost their defaults: %+v", th)
	}
	if err := th.Validate(); err != nil {
		t.Error(err)
	}
}

func TestThresholdsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*diagnose.Thresholds)
		keys   []string
	}{
		{"zero value", func(th *diagnose.Thresholds) { *th = diagnose.Thresholds{} }, []string{"stale_after", "kv_crit", "ttft_p99_warn", "outlier_ratio", "min_peers"}},
		{"kv order", func(th *diagnose.Thresholds) { th.KVWarn, th.KVCrit = 0.96, 0.95 }, []string{"kv_warn"}},
		{"kv above 1", func(th *diagnose.Thresholds) { th.KVCrit = 1.5 }, []string{"kv_crit"}},
		{"queue order", func(th *diagnose.Thresholds) { th.QueueCrit = 3 }, []string{"queue_crit"}},
		{"latency order", func(th *diagnose.Thresholds) { th.E2EP99Crit = time.Second }, []string{"e2e_p99_warn"}},
		{"fraction", func(th *diagnose.Thresholds) { th.SustainedFraction = 1.5 }, []string{"sustained_fraction"}},
		{"negative", func(th *diagnose.Thresholds) { th.MaxRunning = -1 }, []string{"max_running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := diagnose.DefaultThresholds()
			tc.modify(&th)
			err := th.Validate()
			if err == nil {
				t.Fatal("Validate accepted invalid thresholds")
			}
			for _, k := range tc.keys {
				if !strings.Contains(err.Error(), k+":") {
					t.Errorf("error does not name %s: %v", k, err)
				}
			}
		})
	}
}

func TestLoadThresholds(t *testing.T) {
	partial := diagnose.DefaultThresholds()
	partial.KVWarn, partial.QueueCritFor, partial.ITLP99Warn, partial.MinPeers = 0.85, 2*time.Minute, 150*time.Millisecond, 3
	for _, tc := range []struct {
		name string
		doc  string
		want diagnose.Thresholds
		errs []string // substrings the error must contain; nil: no error
	}{
		{name: "empty", doc: "", want: diagnose.DefaultThresholds()},
		{name: "comments only", doc: "# nothing\n", want: diagnose.DefaultThresholds()},
		{name: "partial keeps defaults", doc: "kv_warn: 0.85\nqueue_crit_for: 2m\nitl_p99_warn: 150ms\nmin_peers: 3\n", want: partial},
		{name: "unknown key", doc: "kv_warn: 0.85\nkv_critical: 0.99\n", errs: []string{`line 2: unknown key "kv_critical"`}},
		{name: "bad duration", doc: "ttft_p99_warn: 10x\n", errs: []string{"line 1: ttft_p99_warn:", `"10x"`}},
		{name: "number for duration", doc: "queue_crit_for: 300\n", errs: []string{"line 1: queue_crit_for: want a duration"}},
		{name: "string for number", doc: "\nqueue_crit: lots\n", errs: []string{"line 2: queue_crit: want a number"}},
		{name: "fraction for int", doc: "min_peers: 1.5\n", errs: []string{"line 1: min_peers: want a whole number"}},
		{name: "out of range", doc: "kv_crit: 1.5\n", errs: []string{"kv_crit: must be in (0, 1]"}},
		{name: "out of order", doc: "kv_warn: 0.97\n", errs: []string{"kv_warn: must be below kv_crit"}},
		{name: "repeated", doc: "kv_warn: 0.8\nkv_warn: 0.85\n", errs: []string{"line 2: kv_warn: repeated (first on line 1)"}},
		{name: "not a mapping", doc: "- kv_warn\n", errs: []string{"want a mapping"}},
		{name: "nested value", doc: "kv_warn:\n  a: 1\n", errs: []string{"kv_warn: want a single value"}},
		{name: "every error at once", doc: "foo: 1\nbar: 2\n", errs: []string{`unknown key "foo"`, `unknown key "bar"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diagnose.LoadThresholds(strings.NewReader(tc.doc))
			if tc.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("got %+v\nwant %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %q", tc.doc)
			}
			for _, s := range tc.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q: %v", s, err)
				}
			}
		})
	}
}

// TestWriteThresholdsRoundTrip: the printed defaults (`llmdiag thresholds`)
// load back to exactly DefaultThresholds(), and so do non-default values.
func TestWriteThresholdsRoundTrip(t *testing.T) {
	custom := diagnose.DefaultThresholds()
	custom.KVWarn, custom.StaleAfter, custom.E2EP99Crit, custom.ITLP99Warn = 0.875, 90*time.Second, 90*time.Minute, 250*time.Millisecond
	custom.MaxRunning, custom.MinPeers = 256, 4
	for _, th := range []diagnose.Thresholds{diagnose.DefaultThresholds(), custom} {
		var b strings.Builder
		if err := diagnose.WriteThresholds(&b, th); err != nil {
			t.Fatal(err)
		}
		got, err := diagnose.LoadThresholds(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if got != th {
			t.Errorf("round trip changed thresholds:\ngot  %+v\nwant %+v\n%s", got, th, b.String())
		}
	}
}

// TestWriteThresholdsDocumentsEveryKey: every field is printed, once, with a
// comment above it that says where its default comes from.
func TestWriteThresholdsDocumentsEveryKey(t *testing.T) {
	var b strings.Builder
	if err := diagnose.WriteThresholds(&b, diagnose.DefaultThresholds()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	rt := reflect.TypeFor[diagnose.Thresholds]()
	for i := range rt.NumField() {
		key := rt.Field(i).Tag.Get("yaml")
		n := 0
		for j, l := range lines {
			if !strings.HasPrefix(l, key+": ") {
				continue
			}
			n++
			if j == 0 || !strings.HasPrefix(lines[j-1], "# ") {
				t.Errorf("%s has no comment above it", key)
				continue
			}
			// The comment block above the key says "Default".
			k := j - 1
			for k > 0 && strings.HasPrefix(lines[k-1], "# ") {
				k--
			}
			if block := strings.Join(lines[k:j], " "); !strings.Contains(block, "Default") {
				t.Errorf("%s: comment does not say where the default comes from: %s", key, block)
			}
		}
		if n != 1 {
			t.Errorf("%s printed %d times, want once", key, n)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "5m", 200 * time.Millisecond: "200ms", 30 * time.Second: "30s",
		time.Hour: "1h", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s", 0: "0s",
	} {
		if got := diagnose.ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestThresholdsPage: docs/thresholds.md lists every key, once, with the
// default `llmdiag thresholds` prints for it.
func TestThresholdsPage(t *testing.T) {
	page, err := os.ReadFile("../docs/thresholds.md")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := diagnose.WriteThresholds(&b, diagnose.DefaultThresholds()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // key → default as printed
	for _, l := range strings.Split(b.String(), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && !strings.HasPrefix(l, "#") {
			want[k] = strings.Trim(v, `"`)
		}
	}
	row := regexp.MustCompile("^\\| `([a-z0-9_]+)` \\| `([^`]*)` \\|")
	got := map[string]string{}
	for _, l := range strings.Split(string(page), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if _, dup := got[m[1]]; dup {
			t.Errorf("docs/thresholds.md lists %s twice", m[1])
		}
		got[m[1]] = m[2]
	}
	if len(want) == 0 {
		t.Fatal("read no keys from WriteThresholds")
	}
	for k, v := range want {
		switch g, ok := got[k]; {
		case !ok:
			t.Errorf("docs/thresholds.md does not list %s (default %s)", k, v)
		case g != v:
			t.Errorf("docs/thresholds.md: %s default %s, llmdiag thresholds prints %s", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("docs/thresholds.md lists %s, which is not a threshold", k)
		}
	}
}
