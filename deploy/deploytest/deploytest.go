// Package deploytest renders deploy/'s manifests for tests, as the objects
// an install sends to the API server: a kustomize overlay with kustomize's
// Go API (what `kubectl apply -k` applies), the Helm chart with Helm's Go
// SDK (what `helm install` and `helm template` render: the chart loaded,
// the values coalesced with its values.yaml and validated against its
// values.schema.json, the templates executed). deploy's tests check the
// objects against serve's flags and each other; a test that applies them to
// an API server uses the same functions.
package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Object is one rendered object: its kind, name and YAML.
type Object struct {
	Kind, Name string
	YAML       []byte
}

// Dir is the absolute path of deploy/, wherever the test runs from.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("deploytest: no caller information")
	}
	return filepath.Dir(filepath.Dir(file))
}

// Chart is the Helm chart's directory.
func Chart() string { return filepath.Join(Dir(), "helm", "llmdiag") }

// Kustomize builds the kustomization in dir (an overlay, say
// filepath.Join(Dir(), "overlays", "single")) with kustomize's Go API.
func Kustomize(dir string) ([]Object, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []Object
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		out = append(out, Object{Kind: r.GetKind(), Name: r.GetName(), YAML: y})
	}
	return out, nil
}

// Release is the release a chart is rendered as.
type Release struct {
	Name, Namespace string
}

// DefaultRelease is `helm install llmdiag deploy/helm/llmdiag` in the
// namespace default, the namespace the kustomize base's
// ClusterRoleBinding names.
var DefaultRelease = Release{Name: "llmdiag", Namespace: "default"}

// Helm renders the chart in dir as rel with values over its values.yaml
// (nil: the defaults), as `helm template` does: an error if the values
// break values.schema.json or a template fails. NOTES.txt and partials are
// not objects and are left out; the objects come in the templates' file
// order, each file's documents in order.
func Helm(dir string, rel Release, values map[string]any) ([]Object, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	if values == nil {
		values = map[string]any{}
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(ch, values,
		common.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true}, nil, false)
	if err != nil {
		return nil, fmt.Errorf("chart %s values: %w", ch.Name(), err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", ch.Name(), err)
	}
	var out []Object
	for _, name := range slices.Sorted(mapKeys(files)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for doc := range strings.SplitSeq(files[name], "\n---") {
			doc = strings.TrimPrefix(doc, "\n")
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", name, err, doc)
			}
			if meta.Kind == "" || meta.Metadata.Name == "" {
				return nil, fmt.Errorf("%s: a document without kind or metadata.name:\n%s", name, doc)
			}
			out = append(out, Object{Kind: meta.Kind, Name: meta.Metadata.Name, YAML: []byte(doc)})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the chart rendered no object")
	}
	return out, nil
}

func stripComments(doc string) string {
	var b bytes.Buffer
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
