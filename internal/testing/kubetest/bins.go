package kubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// EnvBins names a directory holding etcd, kube-apiserver and
// kube-controller-manager; when set, nothing else is looked at.
const EnvBins = "LLMDIAG_K8S_BINS"

// BuildScript builds the binaries into CacheDir's directory; its path is
// relative to the repository's root.
const BuildScript = "scripts/k8sbins.sh"

// The binaries Start runs, as named in the directory.
const (
	etcdBin              = "etcd"
	apiserverBin         = "kube-apiserver"
	controllerManagerBin = "kube-controller-manager"
)

// Bins returns the directory holding the control plane's binaries. Under
// -short it skips the test; when a binary is missing it fails the test
// with the command that builds them.
func Bins(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skips tests that run a real Kubernetes control plane (etcd, kube-apiserver)")
	}
	dir, get, err := binsDir()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	for _, name := range []string{etcdBin, apiserverBin, controllerManagerBin} {
		testkit.Binary(t, testkit.Program{
			Name:       name,
			Candidates: []string{filepath.Join(dir, name)},
			Get:        get,
		})
	}
	return dir
}

// binsDir is where the binaries are looked for, and how to get them there.
func binsDir() (dir, get string, err error) {
	if v := os.Getenv(EnvBins); v != "" {
		return v, "put etcd, kube-apiserver and kube-controller-manager into " + EnvBins + "=" + v + ", or unset it to use the ones " + BuildScript + " builds", nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", "", fmt.Errorf("%v; set %s to a directory holding etcd, kube-apiserver and kube-controller-manager", err, EnvBins)
	}
	dir, err = CacheDir(root, runtime.Version())
	if err != nil {
		return "", "", err
	}
	get = fmt.Sprintf("build them with `cd %s && %s` (about 10 minutes on 2 cores, once), or set %s to a directory holding them", root, BuildScript, EnvBins)
	return dir, get, nil
}

// CacheDir is the directory scripts/k8sbins.sh builds into for the
// repository at root and the Go version goVersion ("go1.26.8"):
// $HOME/.cache/llmdiag/k8sbins/<key>, where the key names the Kubernetes,
// etcd and Go versions and ends with the first 12 hex digits of the SHA-256
// of hack/k8sbins/go.mod, hack/k8sbins/go.sum, hack/etcdbin/go.mod and
// hack/etcdbin/go.sum, in that order (testkit.BuildCacheDir). The script
// computes the same.
func CacheDir(root, goVersion string) (string, error) {
	k8s, err := testkit.GoModRequire(filepath.Join(root, "hack/k8sbins/go.mod"), "k8s.io/kubernetes")
	if err != nil {
		return "", err
	}
	etcd, err := testkit.GoModRequire(filepath.Join(root, "hack/etcdbin/go.mod"), "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", err
	}
	if k8s == "" || etcd == "" {
		return "", errors.New("hack/k8sbins/go.mod or hack/etcdbin/go.mod requires no k8s.io/kubernetes or go.etcd.io/etcd/server/v3")
	}
	return testkit.BuildCacheDir(root, "k8sbins", fmt.Sprintf("k8s-%s-etcd-%s-%s", k8s, etcd, goVersion),
		"hack/k8sbins/go.mod", "hack/k8sbins/go.sum", "hack/etcdbin/go.mod", "hack/etcdbin/go.sum")
}

// repoRoot is the repository's root while go test runs a package in it.
func repoRoot() (string, error) { return testkit.RepoRoot("hack/k8sbins/go.mod") }
