package fleetsd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/inferencepool"

	// The discovery mechanisms llmdiag supports register their config
	// types (kubernetes_sd_configs, …) with Prometheus's config package.
	_ "github.com/prometheus/prometheus/discovery/dns"
	_ "github.com/prometheus/prometheus/discovery/file"
	_ "github.com/prometheus/prometheus/discovery/http"
)

// MaxJobs bounds the scrape configs of one file.
const MaxJobs = 100

// File is a parsed discovery file: its scrape configs, in order.
type File struct {
	Jobs []*Job
}

// Job is one scrape config: Prometheus's own, with the relabel rules
// llmdiag applies (the job's, or Defaults for its Kubernetes role when it
// has none), and whether a node's scrape follows redirects.
type Job struct {
	// Config is the job as Prometheus's config package reads it; its
	// RelabelConfigs are the rules applied.
	Config *promconfig.ScrapeConfig
	// Defaulted names the default rules applied ("kubernetes pod"), empty
	// when the job has relabel_configs of its own or needs none.
	Defaulted string
	// FollowRedirects is the job's follow_redirects when it says so;
	// llmdiag's default is not to follow (Prometheus's is to follow).
	FollowRedirects bool
}

// Name is the job's name.
func (j *Job) Name() string { return j.Config.JobName }

// jobKeys are the keys of a scrape config llmdiag acts on.
var jobKeys = []string{
	"job_name", "kubernetes_sd_configs", "file_sd_configs", "http_sd_configs", "dns_sd_configs", "static_configs",
	"inferencepool_sd_configs", "relabel_configs", "metrics_path", "scheme", "params", "follow_redirects",
}

// why says why a key Prometheus knows is refused.
var why = map[string]string{
	"scrape_interval":        "llmdiag scrapes every serve --interval",
	"scrape_timeout":         "llmdiag's deadline is serve --scrape-timeout",
	"metric_relabel_configs": "llmdiag reads the engines' metric names as they are",
	"sample_limit":           "the limit is serve --scrape-max-series",
	"honor_labels":           "llmdiag stores no series",
	"honor_timestamps":       "llmdiag stores no series",
	"basic_auth":             "put the user and password in the target's URL instead (see docs/configuration.md)",
	"authorization":          "llmdiag's scrapes send no credentials but a URL's user and password",
	"bearer_token":           "llmdiag's scrapes send no credentials but a URL's user and password",
	"bearer_token_file":      "llmdiag's scrapes send no credentials but a URL's user and password",
	"oauth2":                 "llmdiag's scrapes send no credentials but a URL's user and password",
	"tls_config":             "llmdiag's scrapes use the system's CAs",
	"proxy_url":              "llmdiag's scrapes use the environment's proxy",
	"scrape_config_files":    "put the scrape configs in this file",
}

// Parse reads a discovery file: a YAML mapping whose only key is
// scrape_configs, a list in Prometheus's schema. Every key llmdiag does not
// act on is refused with an error naming it; the rest is read and checked
// by Prometheus's config package (so it means what it means to
// Prometheus). Relative paths (file_sd_configs files, kubeconfig_file,
// certificates) are taken from dir. log receives the config package's
// warnings.
func Parse(data []byte, dir string, log *slog.Logger) (*File, error) {
	if err := checkKeys(data); err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	inferencepool.Register()
	pools, err := inferencePoolRole(data)
	if err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	cfg, err := promconfig.Load(string(pools), log)
	if err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	if dir != "" {
		cfg.SetDirectory(dir)
	}
	scs, err := cfg.GetScrapeConfigs()
	if err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	follow, err := followRedirects(data)
	if err != nil {
		return nil, err
	}
	f := &File{}
	for i, sc := range scs {
		j := &Job{Config: sc, FollowRedirects: follow[i]}
		if err := j.defaults(); err != nil {
			return nil, fmt.Errorf("discovery file: scrape_configs[%d] (job %q): %w", i, sc.JobName, err)
		}
		f.Jobs = append(f.Jobs, j)
	}
	return f, nil
}

// Load reads the discovery file at path (relative paths in it are taken
// from its directory).
func Load(path string, log *slog.Logger) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read discovery file: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	return Parse(data, dir, log)
}

// checkKeys refuses a file that is not a mapping with scrape_configs alone,
// and every key of a scrape config llmdiag does not act on.
func checkKeys(data []byte) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return errors.New("want a mapping with the key scrape_configs")
	}
	top := doc.Content[0]
	var jobs *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if k.Value != "scrape_configs" {
			return fmt.Errorf("line %d: key %q is not supported: the file holds scrape_configs only", k.Line, k.Value)
		}
		jobs = top.Content[i+1]
	}
	if jobs == nil || jobs.Kind != yaml.SequenceNode || len(jobs.Content) == 0 {
		return errors.New("scrape_configs: want a list of at least one scrape config")
	}
	if len(jobs.Content) > MaxJobs {
		return fmt.Errorf("scrape_configs: %d scrape configs, more than the %d allowed", len(jobs.Content), MaxJobs)
	}
	for n, job := range jobs.Content {
		if job.Kind != yaml.MappingNode {
			return fmt.Errorf("scrape_configs[%d] (line %d): want a mapping", n, job.Line)
		}
		for i := 0; i+1 < len(job.Content); i += 2 {
			k := job.Content[i]
			if slices.Contains(jobKeys, k.Value) {
				continue
			}
			msg := fmt.Sprintf("scrape_configs[%d] line %d: key %q is not supported by llmdiag", n, k.Line, k.Value)
			if w := why[k.Value]; w != "" {
				msg += ": " + w
			} else if strings.HasSuffix(k.Value, "_sd_configs") {
				msg += ": the discovery mechanisms supported are kubernetes_sd_configs, file_sd_configs, http_sd_configs, dns_sd_configs, static_configs and inferencepool_sd_configs"
			}
			return errors.New(msg)
		}
	}
	return nil
}

// followRedirects is each scrape config's follow_redirects when given,
// false otherwise (checkKeys has checked the shape).
func followRedirects(data []byte) ([]bool, error) {
	var doc struct {
		ScrapeConfigs []struct {
			FollowRedirects *bool `yaml:"follow_redirects"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	out := make([]bool, len(doc.ScrapeConfigs))
	for i, sc := range doc.ScrapeConfigs {
		out[i] = sc.FollowRedirects != nil && *sc.FollowRedirects
	}
	return out, nil
}

// defaults gives a job without relabel_configs the default rules of its
// Kubernetes role. A job that mixes roles, or Kubernetes with another
// mechanism, needs rules of its own.
func (j *Job) defaults() error {
	if len(j.Config.RelabelConfigs) > 0 {
		return nil
	}
	roles := map[kubernetes.Role]bool{}
	others := 0
	for _, c := range j.Config.ServiceDiscoveryConfigs {
		switch k := c.(type) {
		case *kubernetes.SDConfig:
			roles[k.Role] = true
		case *inferencepool.SDConfig:
			roles[RoleInferencePool] = true
		default:
			others++
		}
	}
	switch {
	case len(roles) == 0:
		return nil
	case len(roles) > 1 || others > 0:
		return errors.New("without relabel_configs a job may discover with one Kubernetes role alone (default rules are per role): split it into jobs, or give relabel_configs")
	}
	for role := range roles {
		rules, ok := Defaults()[string(role)]
		if !ok {
			return fmt.Errorf("kubernetes role %q has no default relabel_configs (pod, endpoints, endpointslice and inferencepool have): give relabel_configs", role)
		}
		j.Config.RelabelConfigs = rules
		j.Defaulted = "kubernetes " + string(role)
	}
	return nil
}

// RoleInferencePool is the role kubernetes_sd_configs takes in a discovery
// file for the pods behind InferencePools: llmdiag reads such an entry as
// inferencepool_sd_configs (package inferencepool), with its
// kubeconfig_file and namespaces; Prometheus has no such role.
const RoleInferencePool kubernetes.Role = "inferencepool"

// inferencePoolRole moves every kubernetes_sd_configs entry whose role is
// inferencepool into its job's inferencepool_sd_configs, and returns the
// file as Prometheus's config package is to read it (checkKeys has checked
// the shape).
func inferencePoolRole(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	moved := false
	jobs := doc.Content[0].Content[1]
	for _, job := range jobs.Content {
		var k8s, pools *yaml.Node
		k8sAt := -1
		for i := 0; i+1 < len(job.Content); i += 2 {
			switch job.Content[i].Value {
			case "kubernetes_sd_configs":
				k8s, k8sAt = job.Content[i+1], i
			case "inferencepool_sd_configs":
				pools = job.Content[i+1]
			}
		}
		if k8s == nil || k8s.Kind != yaml.SequenceNode {
			continue
		}
		var keep []*yaml.Node
		for _, c := range k8s.Content {
			if !isPoolRole(c) {
				keep = append(keep, c)
				continue
			}
			if pools == nil {
				pools = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
				job.Content = append(job.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "inferencepool_sd_configs"}, pools)
			}
			pools.Content = append(pools.Content, withoutRole(c))
			moved = true
		}
		k8s.Content = keep
		if len(keep) == 0 {
			job.Content = slices.Delete(job.Content, k8sAt, k8sAt+2)
		}
	}
	if !moved {
		return data, nil
	}
	return yaml.Marshal(&doc)
}

// isPoolRole reports whether a kubernetes_sd_configs entry has role
// inferencepool.
func isPoolRole(c *yaml.Node) bool {
	for i := 0; c.Kind == yaml.MappingNode && i+1 < len(c.Content); i += 2 {
		if c.Content[i].Value == "role" && c.Content[i+1].Value == string(RoleInferencePool) {
			return true
		}
	}
	return false
}

// withoutRole is entry c without its role key.
func withoutRole(c *yaml.Node) *yaml.Node {
	out := *c
	out.Content = nil
	for i := 0; i+1 < len(c.Content); i += 2 {
		if c.Content[i].Value != "role" {
			out.Content = append(out.Content, c.Content[i], c.Content[i+1])
		}
	}
	return &out
}
