package promtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestKubernetesSDDirMatchesScript: the directory KubernetesSD looks in is
// the one scripts/prombin.sh builds into.
func TestKubernetesSDDirMatchesScript(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("bash", filepath.Join(root, KubernetesSDScript), "-n").Output() // exits 1 when not built
	want := strings.TrimSpace(string(out))
	got, err := KubernetesSDDir(root, runtime.Version())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("KubernetesSDDir = %s\n%s -n prints %s", got, KubernetesSDScript, want)
	}
	if !strings.Contains(got, "/.cache/llmdiag/prombin/prometheus-v0.316.0-"+runtime.Version()+"-") {
		t.Errorf("KubernetesSDDir = %s: want it to name the versions", got)
	}
}
