package fleetsd

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	k8sclient "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/llmdiag/llmdiag/inferencepool"
)

// kubeRequests counts the Kubernetes client's requests by API server
// (host:port) as client-go reports each one's result (its RequestResult
// metric): those that got no answer (a refused or broken connection:
// code "<error>") or a 5xx, and those answered 2xx. The Kubernetes client
// retries a watch whose connection is refused without a word and without
// telling its informer's error handler, so this is how an API server that
// went away after the first list is seen. client-go has one such metric
// per process: every Kubernetes client of the process reports to it, but
// for inferencepool's (inferencepool.Own), which watches its own.
type kubeRequests struct {
	mu     sync.Mutex
	byHost map[string]*kubeCounts
	// next is the metric registered before, set in init only.
	next clientmetrics.ResultMetric
}

// kubeCounts are one API server's requests.
type kubeCounts struct {
	failed, answered uint64
}

var kubeReqs = &kubeRequests{byHost: map[string]*kubeCounts{}}

// init makes kubeReqs client-go's RequestResult metric before any client
// makes a request. client-go keeps the first metric registered: when a
// package initialized before registered its own (controller-runtime's
// metrics package does, in tests), kubeReqs counts and passes each result
// on to it.
func init() {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: kubeReqs})
	if clientmetrics.RequestResult != clientmetrics.ResultMetric(kubeReqs) {
		kubeReqs.next = clientmetrics.RequestResult
		clientmetrics.RequestResult = kubeReqs
	}
}

// Increment counts one request's result (client-go's ResultMetric).
func (k *kubeRequests) Increment(ctx context.Context, code, method, host string) {
	if k.next != nil {
		k.next.Increment(ctx, code, method, host)
	}
	if inferencepool.Own(ctx) || ctx != nil && ctx.Value(probeKey{}) != nil {
		return // inferencepool watches its own requests; a probe's say nothing of the discoverer's
	}
	if code == "<error>" && ctx != nil && ctx.Err() != nil {
		return // cancelled here (discoverers started anew): nothing of the server
	}
	failed := code == "<error>" || strings.HasPrefix(code, "5")
	answered := strings.HasPrefix(code, "2")
	if !failed && !answered {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.byHost[host]
	if c == nil {
		if len(k.byHost) >= maxKubeHosts {
			return
		}
		c = &kubeCounts{}
		k.byHost[host] = c
	}
	if failed {
		c.failed++
	} else {
		c.answered++
	}
}

// maxKubeHosts bounds the API servers counted.
const maxKubeHosts = 64

// counts are host's requests so far; every host's when host is "".
func (k *kubeRequests) counts(host string) kubeCounts {
	k.mu.Lock()
	defer k.mu.Unlock()
	if host != "" {
		if c := k.byHost[host]; c != nil {
			return *c
		}
		return kubeCounts{}
	}
	var sum kubeCounts
	for _, c := range k.byHost {
		sum.failed += c.failed
		sum.answered += c.answered
	}
	return sum
}

// apiHost is the host:port of the API server a Kubernetes discovery
// config talks to, as client-go names it in its metrics; "" when it cannot
// be told (then any API server's requests count for it).
func apiHost(c discovery.Config) string {
	var kubeconfig string
	switch k := c.(type) {
	case *kubernetes.SDConfig:
		if k.APIServer.URL != nil {
			return k.APIServer.URL.Host
		}
		kubeconfig = k.KubeConfig
	case *inferencepool.SDConfig:
		kubeconfig = k.KubeconfigFile
	default:
		return ""
	}
	if kubeconfig == "" { // in the cluster, as rest.InClusterConfig
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return ""
		}
		return net.JoinHostPort(host, port)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return ""
	}
	u, err := url.Parse(rc.Host)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

// probeKey marks the context of a probe's request: not counted.
type probeKey struct{}

// probes ask each kubernetes_sd_configs provider's API server whether it
// answers (GET /version, with the provider's credentials), each with a
// client made on first use.
type probes struct {
	file    *File
	timeout time.Duration
	clients map[provider]rest.Interface
}

func newProbes(f *File, timeout time.Duration) *probes {
	return &probes{file: f, timeout: min(timeout, 5*time.Second), clients: map[provider]rest.Interface{}}
}

// ok reports whether p's API server answers.
func (ps *probes) ok(ctx context.Context, p kubeProvider) bool {
	c, found := ps.clients[p.provider]
	if !found {
		c = ps.client(p.provider)
		ps.clients[p.provider] = c
	}
	if c == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, probeKey{}, true), ps.timeout)
	defer cancel()
	return c.Get().AbsPath("/version").Do(ctx).Error() == nil
}

// client is a REST client to p's API server as Prometheus's kubernetes
// discovery makes it (in the cluster, from kubeconfig_file, or api_server
// with its HTTP client settings); nil when it cannot be made.
func (ps *probes) client(p provider) rest.Interface {
	var k *kubernetes.SDConfig
	for _, j := range ps.file.Jobs {
		if j.Name() == p.job && p.index < len(j.Config.ServiceDiscoveryConfigs) {
			k, _ = j.Config.ServiceDiscoveryConfigs[p.index].(*kubernetes.SDConfig)
		}
	}
	if k == nil {
		return nil
	}
	rc, err := sdRESTConfig(k)
	if err != nil {
		return nil
	}
	cs, err := k8sclient.NewForConfig(rc)
	if err != nil {
		return nil
	}
	return cs.Discovery().RESTClient()
}

// sdRESTConfig is the client configuration Prometheus's kubernetes
// discovery makes of k: from kubeconfig_file, api_server with its HTTP
// client settings, or in the cluster.
func sdRESTConfig(k *kubernetes.SDConfig) (*rest.Config, error) {
	switch {
	case k.KubeConfig != "":
		return clientcmd.BuildConfigFromFlags("", k.KubeConfig)
	case k.APIServer.URL == nil:
		return rest.InClusterConfig()
	}
	rt, err := promcfg.NewRoundTripperFromConfig(k.HTTPClientConfig, "kubernetes_sd")
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: k.APIServer.String(), Transport: rt}, nil
}

// ErrNoKubernetes is returned by KubeConfig for a file with no Kubernetes
// discovery.
var ErrNoKubernetes = errors.New("no kubernetes_sd_configs in the discovery file")

// KubeConfig is the Kubernetes client configuration of the file's first
// Kubernetes discovery (kubernetes_sd_configs of any role, inferencepool
// included), as that discovery makes it: its kubeconfig_file, its
// api_server with its HTTP client settings, or the pod's service account
// in the cluster. ErrNoKubernetes when the file has none. What else talks
// to the same cluster (serve --readiness-gate) uses it.
func (f *File) KubeConfig() (*rest.Config, error) {
	for _, j := range f.Jobs {
		for _, c := range j.Config.ServiceDiscoveryConfigs {
			switch k := c.(type) {
			case *kubernetes.SDConfig:
				return sdRESTConfig(k)
			case *inferencepool.SDConfig:
				if k.KubeconfigFile != "" {
					return clientcmd.BuildConfigFromFlags("", k.KubeconfigFile)
				}
				return rest.InClusterConfig()
			}
		}
	}
	return nil, ErrNoKubernetes
}
