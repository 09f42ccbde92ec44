package tlsreload_test

import (
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/tlsreload"
)

func options(c *testkit.Clock, lb *testkit.SyncBuffer) tlsreload.Options {
	return tlsreload.Options{Every: time.Second, Now: c.Now, Log: slog.New(slog.NewTextHandler(lb, nil))}
}

func serialOf(t *testing.T, c *tlsreload.Certificate) string {
	t.Helper()
	return c.Current().Leaf.SerialNumber.String()
}

// TestCertificateRotation: new files are served at the first look after
// Every has passed, not before, and the reload is logged.
func TestCertificateRotation(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	first, second := ca.Server(t), ca.Server(t)
	certFile, keyFile := first.WriteFiles(t, t.TempDir(), "server")
	clk, lb := testkit.NewClock(time.Unix(1e9, 0)), &testkit.SyncBuffer{}
	c, err := tlsreload.NewCertificate(certFile, keyFile, options(clk, lb))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := serialOf(t, c), first.Cert.SerialNumber.String(); got != want {
		t.Fatalf("serial %s, want the first certificate's %s", got, want)
	}
	second.Write(t, certFile, keyFile)
	clk.Add(999 * time.Millisecond)
	if got, want := serialOf(t, c), first.Cert.SerialNumber.String(); got != want {
		t.Fatalf("before Every: serial %s, want still the first %s", got, want)
	}
	clk.Add(time.Millisecond)
	if got, want := serialOf(t, c), second.Cert.SerialNumber.String(); got != want {
		t.Fatalf("after Every: serial %s, want the second certificate's %s", got, want)
	}
	if n := strings.Count(lb.String(), "tls: reloaded certificate"); n != 1 {
		t.Errorf("%d reload lines, want 1:\n%s", n, lb.String())
	}
	// Unchanged files are not reloaded again.
	clk.Add(time.Hour)
	_ = c.Current()
	if n := strings.Count(lb.String(), "tls: reloaded certificate"); n != 1 {
		t.Errorf("%d reload lines after an unchanged look, want 1", n)
	}
}

// TestCertificateBadChangeKeepsServing: a change that does not load keeps
// the previous pair in service, is logged once however often the files are
// looked at, and the next good change is served.
func TestCertificateBadChangeKeepsServing(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	first, second := ca.Server(t), ca.Server(t)
	dir := t.TempDir()
	certFile, keyFile := first.WriteFiles(t, dir, "server")
	clk, lb := testkit.NewClock(time.Unix(1e9, 0)), &testkit.SyncBuffer{}
	c, err := tlsreload.NewCertificate(certFile, keyFile, options(clk, lb))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func()
		serial *x509.Certificate // served after the change
		errors int               // failed loads logged so far
	}{
		{"new certificate, old key", func() { writeFile(t, certFile, second.CertPEM) }, first.Cert, 1},
		{"looked at again, unchanged", func() {}, first.Cert, 1},
		{"key written too", func() { writeFile(t, keyFile, second.KeyPEM) }, second.Cert, 1},
		{"truncated certificate", func() { writeFile(t, certFile, second.CertPEM[:40]) }, second.Cert, 2},
		{"certificate removed", func() { rm(t, certFile) }, second.Cert, 3},
		{"still removed", func() {}, second.Cert, 3},
		{"back to the first pair", func() { first.Write(t, certFile, keyFile) }, first.Cert, 3},
	}
	for _, s := range steps {
		s.change()
		clk.Add(time.Second)
		if got, want := serialOf(t, c), s.serial.SerialNumber.String(); got != want {
			t.Fatalf("%s: serial %s, want %s", s.name, got, want)
		}
		if n := strings.Count(lb.String(), "did not load"); n != s.errors {
			t.Fatalf("%s: %d failed loads logged, want %d:\n%s", s.name, n, s.errors, lb.String())
		}
	}
}

func TestNewFailsOnBadFiles(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir, "server")
	_, otherKey := ca.Server(t).WriteFiles(t, dir, "other")
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct{ name, cert, key string }{
		{"missing certificate", missing, keyFile},
		{"missing key", certFile, missing},
		{"key of another certificate", certFile, otherKey},
		{"key for certificate", keyFile, keyFile},
	} {
		if _, err := tlsreload.NewCertificate(tc.cert, tc.key, tlsreload.Options{}); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	for _, f := range []string{missing, keyFile} {
		if _, err := tlsreload.NewPool(f, tlsreload.Options{}); err == nil {
			t.Errorf("pool from %s: no error", filepath.Base(f))
		}
	}
}

// TestPoolRotation: a CA file rewritten with another CA is verified against
// after Every; a broken rewrite keeps the last pool.
func TestPoolRotation(t *testing.T) {
	a, b := certtest.NewCA(t, "a"), certtest.NewCA(t, "b")
	ca := a.WriteFile(t, t.TempDir(), "ca.pem")
	clk, lb := testkit.NewClock(time.Unix(1e9, 0)), &testkit.SyncBuffer{}
	p, err := tlsreload.NewPool(ca, options(clk, lb))
	if err != nil {
		t.Fatal(err)
	}
	leafA, leafB := a.Client(t, "x").Cert, b.Client(t, "y").Cert
	verifies := func(leaf *x509.Certificate) bool {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: p.Current(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
	if !verifies(leafA) || verifies(leafB) {
		t.Fatal("the first pool should verify a's leaf only")
	}
	writeFile(t, ca, b.PEM)
	if verifies(leafB) {
		t.Fatal("b's leaf verified before Every passed")
	}
	clk.Add(time.Second)
	if verifies(leafA) || !verifies(leafB) {
		t.Fatal("after the rewrite the pool should verify b's leaf only")
	}
	writeFile(t, ca, []byte("not a certificate"))
	clk.Add(time.Second)
	if !verifies(leafB) || strings.Count(lb.String(), "did not load") != 1 {
		t.Fatalf("a broken CA file should keep b's pool and be logged once:\n%s", lb.String())
	}
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func rm(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
}

// TestCertificateSymlinkSwap: a Kubernetes Secret volume rotates by pointing
// a symlink at a new directory; the files read through it change.
func TestCertificateSymlinkSwap(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	first, second := ca.Server(t), ca.Server(t)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "..v1"), filepath.Join(dir, "..v2")
	for _, d := range []string{v1, v2} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	first.WriteFiles(t, v1, "tls")
	second.WriteFiles(t, v2, "tls")
	data := filepath.Join(dir, "..data")
	if err := os.Symlink(v1, data); err != nil {
		t.Fatal(err)
	}
	clk, lb := testkit.NewClock(time.Unix(1e9, 0)), &testkit.SyncBuffer{}
	c, err := tlsreload.NewCertificate(filepath.Join(data, "tls.crt"), filepath.Join(data, "tls.key"), options(clk, lb))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(v2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, data); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if got, want := serialOf(t, c), second.Cert.SerialNumber.String(); got != want {
		t.Fatalf("after the symlink swap: serial %s, want %s", got, want)
	}
}

// TestCertificateConcurrentHandshakes: handshakes read the certificate
// while it is rotated (run with -race); each gets one of the pairs whole.
func TestCertificateConcurrentHandshakes(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	pairs := []certtest.Pair{ca.Server(t), ca.Server(t)}
	certFile, keyFile := pairs[0].WriteFiles(t, t.TempDir(), "server")
	clk := testkit.NewClock(time.Unix(1e9, 0))
	c, err := tlsreload.NewCertificate(certFile, keyFile, tlsreload.Options{Every: time.Millisecond, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]bool{}
	for _, p := range pairs {
		valid[p.Cert.SerialNumber.String()] = true
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				got, _ := c.GetCertificate(nil)
				if s := got.Leaf.SerialNumber.String(); !valid[s] {
					errs <- s
					return
				}
			}
		}()
	}
	for i := range 50 {
		pairs[i%2].Write(t, certFile, keyFile)
		clk.Add(time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("a handshake got serial %s, of neither pair", s)
	}
}
