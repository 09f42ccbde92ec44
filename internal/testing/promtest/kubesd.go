package promtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// EnvKubernetesSD names a prometheus binary with Kubernetes service
// discovery; when set, KubernetesSD looks at nothing else.
const EnvKubernetesSD = "LLMDIAG_PROMETHEUS_K8S_BIN"

// KubernetesSDScript builds the binary KubernetesSD returns; its path is
// relative to the repository's root.
const KubernetesSDScript = "scripts/prombin.sh"

// KubernetesSD returns a prometheus binary that has Kubernetes service
// discovery (kubernetes_sd_configs), for Options.Binary: the Debian
// package's has none. It is $LLMDIAG_PROMETHEUS_K8S_BIN, else the one
// scripts/prombin.sh builds from hack/prombin into KubernetesSDDir. Under
// -short it skips the test; when the binary is missing it fails the test
// with the command that builds it.
func KubernetesSD(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skips tests that run a real Prometheus")
	}
	if v := os.Getenv(EnvKubernetesSD); v != "" {
		return testkit.Binary(t, testkit.Program{Name: "prometheus", Candidates: []string{v}, Get: "unset " + EnvKubernetesSD + " to use the one " + KubernetesSDScript + " builds"})
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("promtest: %v; set %s to a prometheus with Kubernetes service discovery", err, EnvKubernetesSD)
	}
	dir, err := KubernetesSDDir(root, runtime.Version())
	if err != nil {
		t.Fatalf("promtest: %v", err)
	}
	return testkit.Binary(t, testkit.Program{
		Name:       "prometheus",
		Candidates: []string{filepath.Join(dir, "prometheus")},
		Get:        fmt.Sprintf("build it with `cd %s && %s` (about 3 minutes on 2 cores, once), or set %s to one", root, KubernetesSDScript, EnvKubernetesSD),
	})
}

// KubernetesSDDir is the directory scripts/prombin.sh builds into for the
// repository at root and the Go version goVersion ("go1.26.8"):
// $HOME/.cache/llmdiag/prombin/prometheus-<version>-<go version>-<hash>,
// the version being hack/prombin's requirement of
// github.com/prometheus/prometheus and the hash the first 12 hex digits of
// the SHA-256 of hack/prombin/go.mod then go.sum (testkit.BuildCacheDir).
// The script computes the same.
func KubernetesSDDir(root, goVersion string) (string, error) {
	version, err := testkit.GoModRequire(filepath.Join(root, "hack/prombin/go.mod"), "github.com/prometheus/prometheus")
	if err != nil {
		return "", err
	}
	if version == "" {
		return "", errors.New("hack/prombin/go.mod requires no github.com/prometheus/prometheus")
	}
	return testkit.BuildCacheDir(root, "prombin", fmt.Sprintf("prometheus-%s-%s", version, goVersion), "hack/prombin/go.mod", "hack/prombin/go.sum")
}

// repoRoot is the repository's root while go test runs a package in it.
func repoRoot() (string, error) { return testkit.RepoRoot("hack/prombin/go.mod") }
