package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llmdiag/llmdiag/fleetsd"
	"github.com/llmdiag/llmdiag/readygate"
)

// readinessGateConfig is serve's --readiness-gate and its flags: the pod
// condition llmdiag keeps on the pods that declare it in
// spec.readinessGates (package readygate).
type readinessGateConfig struct {
	condition, kubeconfig, lease, identity string
	leaseDuration, grace                   time.Duration
	qps                                    float64
	burst                                  int
	maxUnready                             float64
}

// register defines the readiness gate's flags on fs, filling f.
func (f *readinessGateConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&f.condition, "readiness-gate", "", "keep this pod condition type (e.g. llmdiag.io/routable) on the pods that declare it in spec.readinessGates and whose nodes name them (the fleet labels namespace and pod, which --discovery's Kubernetes roles set; a fleet file may too): True while routable, False with the cause as reason and the verdict as message while not, so Kubernetes takes the pod out of its Services' endpoints (docs/integrations.md, Kubernetes readiness gates). Needs the Kubernetes API: --readiness-gate-kubeconfig, else the first kubernetes_sd_configs of --discovery, else the pod's service account in the cluster; and RBAC to watch pods, patch pods/status and hold a Lease")
	fs.StringVar(&f.kubeconfig, "readiness-gate-kubeconfig", "", "kubeconfig file for --readiness-gate (default: that of --discovery's first kubernetes_sd_configs, else in-cluster)")
	fs.StringVar(&f.lease, "readiness-gate-lease", "", "NAMESPACE/NAME of the coordination.k8s.io Lease only whose holder writes the gate conditions (default: $POD_NAMESPACE, else default, /"+readygate.DefaultLeaseName+")")
	fs.StringVar(&f.identity, "readiness-gate-identity", "", "this replica's name in --readiness-gate-lease (default: the host name and a random suffix)")
	fs.DurationVar(&f.leaseDuration, "readiness-gate-lease-duration", readygate.DefaultLeaseDuration, "how long the gate's Lease outlives its holder's last renewal: a crashed holder is replaced after about this long; renewed every two thirds of it")
	fs.Float64Var(&f.qps, "readiness-gate-qps", readygate.DefaultQPS, "most writes of gate conditions per second; a write the limit defers is written in its turn, never dropped (llmdiag_readiness_gate_deferred_writes_total)")
	fs.IntVar(&f.burst, "readiness-gate-burst", readygate.DefaultBurst, "burst of --readiness-gate-qps")
	fs.DurationVar(&f.grace, "readiness-gate-grace", readygate.DefaultGrace, "a gated pod with no verdict this long after its creation gets its condition True anyway: llmdiag being slow never keeps a pod unready")
	fs.Float64Var(&f.maxUnready, "max-unready-fraction", readygate.DefaultMaxUnreadyFraction, "with --readiness-gate, most fraction (0 to 1) of a pool's (else a model's) gated pods held False at once; the least loaded of the others are spared (True, reason Spared)")
}

// check refuses values that do not go together.
func (f readinessGateConfig) check() error {
	if f.condition == "" {
		return nil
	}
	if err := readygate.CheckCondition(f.condition); err != nil {
		return fmt.Errorf("--readiness-gate: %w", err)
	}
	switch {
	case f.qps <= 0 || f.burst <= 0:
		return errors.New("--readiness-gate-qps and --readiness-gate-burst must be positive")
	case f.grace < 0:
		return errors.New("--readiness-gate-grace must not be negative")
	case f.maxUnready < 0 || f.maxUnready > 1:
		return fmt.Errorf("--max-unready-fraction %g must be between 0 and 1", f.maxUnready)
	case f.leaseDuration < 3*time.Second:
		return fmt.Errorf("--readiness-gate-lease-duration %s must be at least 3s", f.leaseDuration)
	}
	if f.lease != "" {
		if ns, name, ok := strings.Cut(f.lease, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--readiness-gate-lease %q: want NAMESPACE/NAME", f.lease)
		}
	}
	return nil
}

// readinessGate builds the gate of --readiness-gate; run starts it.
func (s *serving) readinessGate(context.Context) error {
	f := s.cfg.gate
	if f.condition == "" {
		return nil
	}
	if err := f.check(); err != nil {
		return usageError{err}
	}
	rc, err := f.restConfig(s.sdFile)
	if err != nil {
		return usageError{err}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "llmdiag-readiness-gate"
	// The gate's own writes are bounded by --readiness-gate-qps; the
	// client's limit only has to let them and the lease through.
	rc.QPS, rc.Burst = float32(f.qps)+5, f.burst+10
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("--readiness-gate: %w", err)
	}
	ns, name := s.env.Getenv("POD_NAMESPACE"), readygate.DefaultLeaseName
	if f.lease != "" {
		ns, name, _ = strings.Cut(f.lease, "/")
	}
	s.gate, err = readygate.New(readygate.Options{
		Condition: f.condition, Client: cs, Verdicts: s.st.st,
		Plan:           readygate.Rules{StaleAfter: s.cfg.staleAfter, Grace: f.grace, MaxUnreadyFraction: f.maxUnready},
		LeaseNamespace: ns, LeaseName: name, Identity: f.identity, LeaseDuration: f.leaseDuration,
		QPS: f.qps, Burst: f.burst, MaxPods: s.cfg.maxNodes, StopDeadline: min(s.cfg.grace, readygate.DefaultStopDeadline),
		Log: s.log, Registerer: s.reg,
	})
	if err != nil {
		return usageError{err}
	}
	return nil
}

// restConfig is the Kubernetes client configuration of the gate:
// --readiness-gate-kubeconfig, else the discovery file's, else in-cluster.
func (f readinessGateConfig) restConfig(sd *fleetsd.File) (*rest.Config, error) {
	if f.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--readiness-gate-kubeconfig: %w", err)
		}
		return rc, nil
	}
	if sd != nil {
		rc, err := sd.KubeConfig()
		if err == nil {
			return rc, nil
		}
		if !errors.Is(err, fleetsd.ErrNoKubernetes) {
			return nil, fmt.Errorf("--readiness-gate: the Kubernetes client of --discovery: %w", err)
		}
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--readiness-gate needs the Kubernetes API: --readiness-gate-kubeconfig, a kubernetes_sd_configs in --discovery, or running in a pod (%w)", err)
	}
	return rc, nil
}

// runGate runs the gate until ctx is done (it then fails open and
// releases its Lease); done is closed when it has stopped.
func (s *serving) runGate(ctx context.Context) (done <-chan struct{}) {
	d := make(chan struct{})
	if s.gate == nil {
		close(d)
		return d
	}
	go func() {
		defer close(d)
		if err := s.gate.Run(ctx); err != nil {
			s.log.Error("readiness gate stopped", "err", err)
		}
	}()
	return d
}
