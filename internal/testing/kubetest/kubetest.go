package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
)

// Options says what Start runs besides etcd and kube-apiserver.
type Options struct {
	// ControllerManager starts kube-controller-manager with the
	// endpointslice, namespace and garbagecollector controllers (a Service
	// gets EndpointSlices for its ready pods, a deleted namespace empties,
	// owned objects go with their owner).
	ControllerManager bool
}

// Controllers are the controllers kube-controller-manager runs when
// Options.ControllerManager is set.
const Controllers = "endpointslice,namespace,garbagecollector"

const (
	startTimeout = 90 * time.Second // each process, on two busy cores
	stopTimeout  = 20 * time.Second
)

// Cluster is a running control plane.
type Cluster struct {
	// Config is an admin's: a client certificate in system:masters.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file holding Config.
	Kubeconfig string
	// Client is a clientset on Config.
	Client kubernetes.Interface
	// Dir holds the control plane's state: etcd's data, certificates,
	// kubeconfig files.
	Dir string
	// Ready is how long Start took until kube-apiserver was ready (etcd
	// first), and ControllerManagerReady how long the controller manager
	// then took, zero when it was not started.
	Ready, ControllerManagerReady time.Duration

	env *envtest.Environment
}

var discardLogs sync.Once

// Start runs etcd and kube-apiserver (and kube-controller-manager when
// opts ask) for t, and stops them when t ends. See the package comment for
// what it promises.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	bins := Bins(t)
	// envtest logs through controller-runtime's logger, which otherwise
	// prints a warning that no logger was set; its processes' output is
	// kept below instead.
	discardLogs.Do(func() { ctrllog.SetLogger(logr.Discard()) })

	dir := t.TempDir()
	c := &Cluster{Dir: dir}
	g := startGuard(t, dir)
	t.Cleanup(g.release) // runs last: the processes are stopped by then

	var etcdOut, apiOut childproc.LogTail
	etcd := &envtest.Etcd{
		Path:    g.wrap(t, filepath.Join(bins, etcdBin)),
		DataDir: mkdir(t, dir, "etcd"),
		Out:     &etcdOut,
		Err:     &etcdOut,
	}
	api := &envtest.APIServer{
		Path:    g.wrap(t, filepath.Join(bins, apiserverBin)),
		CertDir: mkdir(t, dir, "apiserver"),
		Out:     &apiOut,
		Err:     &apiOut,
	}
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{Etcd: etcd, APIServer: api, KubectlPath: filepath.Join(bins, "kubectl")},
		// The binaries are given above; no KUBEBUILDER_ASSETS is read.
		BinaryAssetsDirectory:    bins,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	t.Cleanup(func() {
		if err := c.env.Stop(); err != nil {
			t.Errorf("kubetest: stop: %v", err)
		}
		if t.Failed() {
			t.Logf("kubetest: etcd's output (end):\n%s", &etcdOut)
			t.Logf("kubetest: kube-apiserver's output (end):\n%s", &apiOut)
		}
	})
	start := time.Now()
	cfg, err := c.env.Start()
	if err != nil {
		t.Fatalf("kubetest: start etcd and kube-apiserver from %s: %v (their output is logged below)", bins, err)
	}
	c.Ready = time.Since(start)
	c.Config = cfg
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, c.env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubetest: etcd and kube-apiserver ready in %v at %s", c.Ready.Round(time.Millisecond), cfg.Host)

	if opts.ControllerManager {
		start := time.Now()
		c.startControllerManager(t, filepath.Join(bins, controllerManagerBin))
		c.ControllerManagerReady = time.Since(start)
		t.Logf("kubetest: kube-controller-manager (%s) ready in %v", Controllers, c.ControllerManagerReady.Round(time.Millisecond))
	}
	return c
}

// startControllerManager runs kube-controller-manager as an admin user on a
// free port and waits until it answers /healthz.
func (c *Cluster) startControllerManager(t testing.TB, bin string) {
	t.Helper()
	kubeconfig := c.WriteKubeconfig(t, c.UserConfig(t, "system:kube-controller-manager", "system:masters"), "controller-manager.kubeconfig")
	certDir := mkdir(t, c.Dir, "controller-manager")
	insecure := &http.Client{Transport: &http.Transport{
		// Its serving certificate is one it makes itself at start.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed
	}}
	var srv childproc.Server
	var port int
	childproc.Ports{
		Name:   "kubetest: kube-controller-manager",
		Server: &srv,
		Run: func(p int) error {
			port = p
			cmd := exec.Command(bin,
				"--kubeconfig="+kubeconfig,
				"--authentication-kubeconfig="+kubeconfig,
				"--authorization-kubeconfig="+kubeconfig,
				"--controllers="+Controllers,
				"--leader-elect=false",
				"--bind-address=127.0.0.1",
				"--secure-port="+strconv.Itoa(p),
				"--cert-dir="+certDir,
			)
			proc, err := srv.Launch(cmd)
			if err != nil {
				return err
			}
			url := fmt.Sprintf("https://127.0.0.1:%d/healthz", p)
			return childproc.Ready{
				Name: "kube-controller-manager", Addr: url, Timeout: startTimeout,
				Check: childproc.HTTPReady(insecure, url),
			}.Wait(proc)
		},
		Stop:  func() { srv.Stop(syscall.SIGTERM) },
		About: func() string { return fmt.Sprintf("%s on 127.0.0.1:%d, kubeconfig %s", bin, port, kubeconfig) },
	}.Start(t)
}

// ctx is the context of the API server calls made for t: done when t ends.
func ctx(t testing.TB) context.Context { return t.Context() }

func mkdir(t testing.TB, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// StopAPIServer stops kube-apiserver, leaving etcd (and the controller
// manager, when running) up, and returns once the process has exited:
// clients then find nothing on its address until StartAPIServer. On
// SIGTERM kube-apiserver stops listening at once but serves the watches
// open until they end; envtest kills it after its stop timeout (20 s).
// It returns how long the process took to go.
func (c *Cluster) StopAPIServer(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.env.ControlPlane.APIServer.Stop(); err != nil {
		// envtest's stop timeout: killed after serving its watches that long.
		t.Logf("kubetest: kube-apiserver stopped: %v", err)
	}
	return time.Since(start)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address with the same certificates and users, and returns once it
// answers /healthz; it returns how long that took.
func (c *Cluster) StartAPIServer(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("kubetest: start kube-apiserver again: %v", err)
	}
	return time.Since(start)
}
