package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
)

// File is the fleet file's top level.
type File struct {
	Nodes []Node `yaml:"nodes"`
}

// Node is one watched inference endpoint.
type Node struct {
	// ID names the node in every API; letters, digits and ._:-/ only.
	ID string `yaml:"id"`
	// URL of its Prometheus /metrics endpoint; needed to scrape the node
	// directly, not when reading it from Prometheus. A password in it
	// (http://user:password@host/metrics) is sent as basic authentication
	// and never shown: answers, logs and errors carry the URL redacted.
	URL string `yaml:"url,omitempty"`
	// FollowRedirects lets a scrape of URL follow redirects (at most 10).
	// Off by default: a target that redirects is reported down, with the
	// status and where it points, and nothing is read from elsewhere.
	FollowRedirects bool `yaml:"follow_redirects,omitempty"`
	// DCGM is the URL of the NVIDIA DCGM exporter serving the node's GPUs
	// (for example http://host:9400/metrics), scraped with URL at every
	// refresh when the node is scraped directly; its GPU figures join the
	// node's metrics (NodeMetrics.gpu). Empty: no GPU figures. A password
	// in it is handled as in URL; redirects follow FollowRedirects.
	DCGM string `yaml:"dcgm,omitempty"`
	// Model it serves; when empty, taken from the engine's model_name label.
	Model string `yaml:"model,omitempty"`
	// Engine: vllm, sglang, …; when empty, detected from metric names.
	Engine string `yaml:"engine,omitempty"`
	// Role in a deployment that disaggregates prefill and decode: prefill,
	// decode or both; when empty, detected from the engine's metrics where
	// it says (see ParseRole), else both. The fleet file's role wins.
	Role    string  `yaml:"role,omitempty"`
	Profile Profile `yaml:"profile,omitempty"`
	// Labels are free-form facts about the node (team, region, gpu pool,
	// …): ListNodes shows them and ComparePercentiles can group by any of
	// them. Keys are Prometheus label names; values are non-empty.
	Labels map[string]string `yaml:"labels,omitempty"`
}

// Profile is how the node is deployed.
type Profile struct {
	DataParallel         uint32  `yaml:"data_parallel,omitempty"`
	TensorParallel       uint32  `yaml:"tensor_parallel,omitempty"`
	ExpertParallel       uint32  `yaml:"expert_parallel,omitempty"`
	PipelineParallel     uint32  `yaml:"pipeline_parallel,omitempty"`
	GPU                  string  `yaml:"gpu,omitempty"`
	ActiveParamsBillions float64 `yaml:"active_params_billions,omitempty"`
	TotalParamsBillions  float64 `yaml:"total_params_billions,omitempty"`
	// KVOffload declares a KV offload tier (cpu, lmcache, …) for engines
	// whose metrics do not show it: GPU KV usage near 100% is then by
	// design (see diagnose/offload.go).
	KVOffload string `yaml:"kv_offload,omitempty"`
}

// Proto returns the profile as the API message.
func (p Profile) Proto() *llmdiagv1.Profile {
	return &llmdiagv1.Profile{
		DataParallel:         p.DataParallel,
		TensorParallel:       p.TensorParallel,
		ExpertParallel:       p.ExpertParallel,
		PipelineParallel:     p.PipelineParallel,
		Gpu:                  p.GPU,
		ActiveParamsBillions: p.ActiveParamsBillions,
		TotalParamsBillions:  p.TotalParamsBillions,
		KvOffload:            p.KVOffload,
	}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)

// ValidID reports whether id is an acceptable node id: 1–128 characters of
// letters, digits and . _ : / -, starting with a letter or digit.
func ValidID(id string) bool { return idPattern.MatchString(id) }

var labelNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// MaxLabelValue bounds a label value's length in bytes.
const MaxLabelValue = 256

// ValidLabelName reports whether name is a Prometheus label name that is not
// reserved: letters, digits and underscores, not starting with a digit or
// with "__".
func ValidLabelName(name string) bool {
	return labelNamePattern.MatchString(name) && !strings.HasPrefix(name, "__")
}

// validateLabels checks one node's labels, in key order so errors are stable.
func validateLabels(i int, labels map[string]string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		switch {
		case !ValidLabelName(k):
			errs = append(errs, fmt.Errorf("nodes[%d].labels %q: want a Prometheus label name (letters, digits and _, not starting with a digit or __)", i, k))
		case v == "":
			errs = append(errs, fmt.Errorf("nodes[%d].labels.%s: empty value", i, k))
		case len(v) > MaxLabelValue || !utf8.ValidString(v):
			errs = append(errs, fmt.Errorf("nodes[%d].labels.%s: want valid UTF-8 of at most %d bytes", i, k, MaxLabelValue))
		}
	}
	return errs
}

// engines names each engine: as fleet files and flags spell it, and as
// people write it.
var engines = []struct {
	engine  llmdiagv1.Engine
	id      string
	aliases []string
	display string
}{
	{llmdiagv1.Engine_ENGINE_VLLM, "vllm", nil, "vLLM"},
	{llmdiagv1.Engine_ENGINE_SGLANG, "sglang", nil, "SGLang"},
	{llmdiagv1.Engine_ENGINE_TRTLLM, "trtllm", []string{"tensorrt-llm"}, "TensorRT-LLM"},
	{llmdiagv1.Engine_ENGINE_TRITON, "triton", nil, "Triton"},
	{llmdiagv1.Engine_ENGINE_TGI, "tgi", nil, "TGI"},
	{llmdiagv1.Engine_ENGINE_DYNAMO, "dynamo", nil, "Dynamo"},
}

// ParseEngine maps an engine name from a fleet file or flag to the API enum.
// The empty string maps to ENGINE_UNSPECIFIED (detect from metrics).
func ParseEngine(s string) (llmdiagv1.Engine, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return llmdiagv1.Engine_ENGINE_UNSPECIFIED, nil
	}
	for _, e := range engines {
		if s == e.id || slices.Contains(e.aliases, s) {
			return e.engine, nil
		}
	}
	return 0, fmt.Errorf("unknown engine %q (want vllm, sglang, trtllm, triton, tgi or dynamo)", s)
}

// EngineName is the inverse of ParseEngine: "vllm", "sglang", … or "".
func EngineName(e llmdiagv1.Engine) string {
	for _, n := range engines {
		if n.engine == e {
			return n.id
		}
	}
	return ""
}

// EngineDisplayName is how people write the engine: "vLLM", "SGLang", … or
// "" when unspecified.
func EngineDisplayName(e llmdiagv1.Engine) string {
	for _, n := range engines {
		if n.engine == e {
			return n.display
		}
	}
	return ""
}

// Validate checks every node: id syntax and uniqueness, http(s) URLs (url,
// dcgm) when given, a known engine name and role, label names and values.
func (f *File) Validate() error {
	var errs []error
	seen := make(map[string]bool, len(f.Nodes))
	for i, n := range f.Nodes {
		if !ValidID(n.ID) {
			errs = append(errs, fmt.Errorf("nodes[%d].id %q: want 1-128 of letters, digits and ._:/-", i, n.ID))
		}
		if seen[n.ID] {
			errs = append(errs, fmt.Errorf("nodes[%d].id %q: duplicate", i, n.ID))
		}
		seen[n.ID] = true
		if n.URL != "" {
			u, err := url.Parse(n.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("nodes[%d].url %q: want an http(s) URL", i, redact.URL(n.URL)))
			}
		}
		if n.DCGM != "" {
			u, err := url.Parse(n.DCGM)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("nodes[%d].dcgm %q: want an http(s) URL", i, redact.URL(n.DCGM)))
			}
		}
		if _, err := ParseEngine(n.Engine); err != nil {
			errs = append(errs, fmt.Errorf("nodes[%d].engine: %w", i, err))
		}
		if _, err := ParseRole(n.Role); err != nil {
			errs = append(errs, fmt.Errorf("nodes[%d].role: %w", i, err))
		}
		errs = append(errs, validateLabels(i, n.Labels)...)
	}
	return errors.Join(errs...)
}

// Parse decodes and validates a fleet file. Unknown keys are errors, so a
// misspelt field does not silently fall back to a default.
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse fleet file: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("invalid fleet file: %w", err)
	}
	return &f, nil
}

// Load reads and parses the fleet file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fleet file: %w", err)
	}
	return Parse(data)
}

// Marshal encodes the fleet file as YAML.
func (f *File) Marshal() ([]byte, error) {
	return yaml.Marshal(f)
}
