package fleetsd_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/discovery/kubernetes"

	"github.com/llmdiag/llmdiag/fleetsd"
)

// TestParse reads every file of testdata/config: its first line says what
// parsing it gives, "# want: ok" or "# want: " and a part of the error.
func TestParse(t *testing.T) {
	files, err := filepath.Glob("testdata/config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bufio.NewReader(bytes.NewReader(data)).ReadLine()
			want, ok := strings.CutPrefix(string(first), "# want: ")
			if !ok {
				t.Fatalf("first line %q: want \"# want: ...\"", first)
			}
			f, err := fleetsd.Parse(data, "testdata/config", nil)
			switch {
			case want == "ok" && err != nil:
				t.Fatalf("Parse: %v", err)
			case want == "ok" && len(f.Jobs) == 0:
				t.Fatal("no jobs")
			case want != "ok" && err == nil:
				t.Fatalf("Parse accepted it, want an error with %q", want)
			case want != "ok" && !strings.Contains(err.Error(), want):
				t.Fatalf("Parse: %v\nwant an error with %q", err, want)
			}
		})
	}
}

// TestParseDefaults: a job with one Kubernetes role and no relabel_configs
// gets that role's default rules; a job with rules of its own keeps them;
// follow_redirects is read.
func TestParseDefaults(t *testing.T) {
	f, err := fleetsd.Load("testdata/config/ok-kubernetes-pod.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	j := f.Jobs[0]
	if k := j.Config.ServiceDiscoveryConfigs[0].(*kubernetes.SDConfig); !filepath.IsAbs(k.KubeConfig) || filepath.Base(k.KubeConfig) != "kubeconfig.yaml" {
		t.Errorf("kubeconfig_file %q, want it taken from the file's directory", k.KubeConfig)
	}
	if j.Defaulted != "kubernetes pod" || len(j.Config.RelabelConfigs) != len(fleetsd.Defaults()["pod"]) {
		t.Errorf("defaulted %q with %d rules, want kubernetes pod with %d", j.Defaulted, len(j.Config.RelabelConfigs), len(fleetsd.Defaults()["pod"]))
	}
	f, err = fleetsd.Load("testdata/config/ok-all-mechanisms.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Jobs[0].FollowRedirects || f.Jobs[1].FollowRedirects {
		t.Errorf("follow_redirects: %v, %v; want true, false", f.Jobs[0].FollowRedirects, f.Jobs[1].FollowRedirects)
	}
	if j := f.Jobs[3]; j.Defaulted != "" || len(j.Config.RelabelConfigs) != 1 {
		t.Errorf("job with its own rules: defaulted %q, %d rules", j.Defaulted, len(j.Config.RelabelConfigs))
	}
	for _, role := range []string{"pod", "endpointslice", "endpoints"} {
		if len(fleetsd.Defaults()[role]) == 0 {
			t.Errorf("no default rules for role %s", role)
		}
	}
}

// TestDefaultsDocumented: docs/configuration.md shows the default rules as
// they are.
func TestDefaultsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, fleetsd.DefaultsYAML) {
		t.Error("docs/configuration.md, A vLLM Deployment on Kubernetes, does not show fleetsd/defaults.yaml as it is: copy it there")
	}
}
