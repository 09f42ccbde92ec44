package testkit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The binaries scripts/k8sbins.sh and scripts/prombin.sh build from Go
// modules are kept under $HOME/.cache/llmdiag/<kind>/<key>, the key naming
// the versions built and ending with a hash of the build modules' go.mod
// and go.sum, so that a change of either builds anew. The scripts compute
// the same keys; the helpers below are the Go side.

// RepoRoot is the nearest directory at or above the working directory
// holding marker (a path relative to the repository's root, such as
// "hack/k8sbins/go.mod"): the repository's root while go test runs a
// package in it.
func RepoRoot(marker string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no %s at or above %s", marker, wd)
		}
	}
}

// BuildCacheDir is $HOME/.cache/llmdiag/<kind>/<prefix>-<hash>, hash being
// the first 12 hex digits of the SHA-256 of files (relative to root) read
// one after the other, as the build scripts compute it with sha256sum.
func BuildCacheDir(root, kind, prefix string, files ...string) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return filepath.Join(home, ".cache", "llmdiag", kind, prefix+"-"+hex.EncodeToString(h.Sum(nil))[:12]), nil
}

// GoModRequire is the version of the first line of the go.mod at path
// whose first field is module (as the scripts' awk reads it), "" when
// none is.
func GoModRequire(path, module string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == module {
			return f[1], nil
		}
	}
	return "", nil
}
