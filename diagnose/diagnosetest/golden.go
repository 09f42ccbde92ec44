package diagnosetest

import (
	"bytes"
	"os"
	"testing"
)

// Golden compares got with the golden file at path; with update set (from a
// test's -update flag) it rewrites the file instead.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (check the change, then run go test -update):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
