package fleetsd_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
)

// pod is the meta labels Kubernetes pod discovery gives one container port
// of pod ns/name at ip, with more labels.
func pod(ns, name, ip, port, portName string, more model.LabelSet) model.LabelSet {
	ls := model.LabelSet{
		"__address__":                                               model.LabelValue(ip + ":" + port),
		"__meta_kubernetes_namespace":                               model.LabelValue(ns),
		"__meta_kubernetes_pod_name":                                model.LabelValue(name),
		"__meta_kubernetes_pod_ip":                                  model.LabelValue(ip),
		"__meta_kubernetes_pod_phase":                               "Running",
		"__meta_kubernetes_pod_ready":                               "true",
		"__meta_kubernetes_pod_host_ip":                             "192.168.1.10",
		"__meta_kubernetes_pod_container_name":                      "vllm",
		"__meta_kubernetes_pod_container_init":                      "false",
		"__meta_kubernetes_pod_container_port_number":               model.LabelValue(port),
		"__meta_kubernetes_pod_container_port_name":                 model.LabelValue(portName),
		"__meta_kubernetes_pod_label_app_kubernetes_io_name":        "vllm-deepseek",
		"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name": "true",
	}
	for k, v := range more {
		ls[k] = v
	}
	return ls
}

const (
	k8sPod = `scrape_configs:
  - job_name: inference
    kubernetes_sd_configs: [{role: pod}]
`
	k8sSlice = `scrape_configs:
  - job_name: inference
    kubernetes_sd_configs: [{role: endpointslice}]
`
	fileSD = `scrape_configs:
  - job_name: files
    file_sd_configs: [{files: [targets.yaml]}]
`
	static = `scrape_configs:
  - job_name: static
    static_configs: [{targets: ["10.0.0.9:8000"]}]
    relabel_configs:
      - source_labels: [__address__]
        regex: '10\.0\.0\.9:8000'
        replacement: kimi-0
        target_label: node
      - target_label: model
        replacement: kimi-k2.6
`
)

// TestNodes: meta labels in (as each mechanism gives them), fleet nodes
// out, through the default rules or the job's own.
func TestNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		idLabel string
		groups  []*targetgroup.Group
		want    []fleet.Node
		refused []string // parts of the refusals' errors
	}{{
		name:   "kubernetes pod, port named http, no annotation",
		config: k8sPod,
		groups: []*targetgroup.Group{{Source: "pod/inference/vllm-0", Targets: []model.LabelSet{
			pod("inference", "vllm-0", "10.0.0.5", "8000", "http", model.LabelSet{"__meta_kubernetes_pod_label_model": "deepseek-v4", "__meta_kubernetes_pod_label_pod_template_hash": "abc"}),
		}}},
		want: []fleet.Node{{ID: "inference/vllm-0:8000", URL: "http://10.0.0.5:8000/metrics", Model: "deepseek-v4", Labels: map[string]string{
			"job": "inference", "namespace": "inference", "pod": "vllm-0", "app": "vllm-deepseek", "app_kubernetes_io_name": "vllm-deepseek", "pod_template_hash": "abc"}}},
	}, {
		name:   "kubernetes pod annotated, on the port and path it names, with DCGM and engine",
		config: k8sPod,
		groups: []*targetgroup.Group{{Source: "pod/inference/sglang-0", Targets: []model.LabelSet{
			pod("inference", "sglang-0", "10.0.0.6", "30000", "", model.LabelSet{
				"__meta_kubernetes_pod_annotation_prometheus_io_scrape": "true",
				"__meta_kubernetes_pod_annotation_prometheus_io_port":   "30001",
				"__meta_kubernetes_pod_annotation_prometheus_io_path":   "/stats",
				"__meta_kubernetes_pod_annotation_llmdiag_io_dcgm_port": "9400",
				"__meta_kubernetes_pod_label_engine":                    "sglang",
				"__meta_kubernetes_pod_label_role":                      "prefill",
			}),
		}}},
		want: []fleet.Node{{ID: "inference/sglang-0:30001", URL: "http://10.0.0.6:30001/stats", Engine: "sglang", Role: "prefill", DCGM: "http://192.168.1.10:9400/metrics",
			Labels: map[string]string{"job": "inference", "namespace": "inference", "pod": "sglang-0", "app": "vllm-deepseek", "app_kubernetes_io_name": "vllm-deepseek"}}},
	}, {
		name:   "kubernetes pods left out: a port of another name, annotated false, an init container, a finished pod",
		config: k8sPod,
		groups: []*targetgroup.Group{{Source: "pods", Targets: []model.LabelSet{
			pod("inference", "a", "10.0.0.1", "9000", "grpc", nil),
			pod("inference", "b", "10.0.0.2", "8000", "http", model.LabelSet{"__meta_kubernetes_pod_annotation_prometheus_io_scrape": "false"}),
			pod("inference", "c", "10.0.0.3", "8000", "metrics", model.LabelSet{"__meta_kubernetes_pod_container_init": "true"}),
			pod("inference", "d", "10.0.0.4", "8000", "metrics", model.LabelSet{"__meta_kubernetes_pod_phase": "Succeeded"}),
		}}},
	}, {
		name:   "kubernetes endpointslice of a pod",
		config: k8sSlice,
		groups: []*targetgroup.Group{{Source: "endpointslice/inference/vllm-x1", Labels: model.LabelSet{
			"__meta_kubernetes_namespace": "inference", "__meta_kubernetes_service_name": "vllm", "__meta_kubernetes_endpointslice_name": "vllm-x1",
		}, Targets: []model.LabelSet{{
			"__address__": "10.0.0.5:8000",
			"__meta_kubernetes_endpointslice_port_name":                 "metrics",
			"__meta_kubernetes_pod_name":                                "vllm-0",
			"__meta_kubernetes_pod_phase":                               "Running",
			"__meta_kubernetes_pod_label_app":                           "vllm",
			"__meta_kubernetes_pod_label_model":                         "glm-4.6",
			"__meta_kubernetes_endpointslice_endpoint_conditions_ready": "true",
		}}}},
		want: []fleet.Node{{ID: "inference/vllm-0:8000", URL: "http://10.0.0.5:8000/metrics", Model: "glm-4.6",
			Labels: map[string]string{"job": "inference", "namespace": "inference", "service": "vllm", "pod": "vllm-0", "app": "vllm"}}},
	}, {
		name:   "file_sd: the file's labels",
		config: fileSD,
		groups: []*targetgroup.Group{{Source: "targets.yaml:0", Labels: model.LabelSet{
			"model": "deepseek-v4", "engine": "vllm", "role": "decode", "dcgm_url": "http://10.0.0.7:9400/metrics", "team": "search", "__meta_filepath": "targets.yaml",
		}, Targets: []model.LabelSet{{"__address__": "10.0.0.7:8000"}, {"__address__": "10.0.0.8:8000"}}}},
		want: []fleet.Node{
			{ID: "10.0.0.7:8000", URL: "http://10.0.0.7:8000/metrics", Model: "deepseek-v4", Engine: "vllm", Role: "decode", DCGM: "http://10.0.0.7:9400/metrics", Labels: map[string]string{"job": "files", "team": "search"}},
			{ID: "10.0.0.8:8000", URL: "http://10.0.0.8:8000/metrics", Model: "deepseek-v4", Engine: "vllm", Role: "decode", DCGM: "http://10.0.0.7:9400/metrics", Labels: map[string]string{"job": "files", "team": "search"}},
		},
	}, {
		name:   "static with the job's own rules naming the node",
		config: static,
		groups: []*targetgroup.Group{{Source: "0", Targets: []model.LabelSet{{"__address__": "10.0.0.9:8000"}}}},
		want:   []fleet.Node{{ID: "kimi-0", URL: "http://10.0.0.9:8000/metrics", Model: "kimi-k2.6", Labels: map[string]string{"job": "static"}}},
	}, {
		name:    "with --prometheus: the id is the instance label",
		config:  k8sPod,
		idLabel: "instance",
		groups: []*targetgroup.Group{{Source: "pod/inference/vllm-0", Targets: []model.LabelSet{
			pod("inference", "vllm-0", "10.0.0.5", "8000", "metrics", nil),
		}}},
		want: []fleet.Node{{ID: "10.0.0.5:8000", URL: "http://10.0.0.5:8000/metrics", Labels: map[string]string{
			"job": "inference", "namespace": "inference", "pod": "vllm-0", "app": "vllm-deepseek", "app_kubernetes_io_name": "vllm-deepseek"}}},
	}, {
		name:   "invalid targets refused: an unknown engine, a bad id, no address",
		config: fileSD,
		groups: []*targetgroup.Group{
			{Source: "a", Labels: model.LabelSet{"engine": "llama.cpp"}, Targets: []model.LabelSet{{"__address__": "10.0.0.1:8000"}}},
			{Source: "b", Labels: model.LabelSet{"node": "-bad id"}, Targets: []model.LabelSet{{"__address__": "10.0.0.2:8000"}}},
			{Source: "c", Targets: []model.LabelSet{{"__address__": ""}}},
		},
		refused: []string{"unknown engine", "want 1-128", "no address"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := fleetsd.Parse([]byte(tc.config), t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, refused := f.Jobs[0].Nodes(tc.groups, tc.idLabel)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("nodes:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(refused) != len(tc.refused) {
				t.Fatalf("refused %+v, want %d", refused, len(tc.refused))
			}
			for i, r := range refused {
				if !strings.Contains(r.Err, tc.refused[i]) || r.Reason != fleetsd.RefusedInvalid {
					t.Errorf("refusal %d: %+v, want invalid with %q", i, r, tc.refused[i])
				}
			}
		})
	}
}
