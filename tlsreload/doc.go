// Package tlsreload serves TLS material from files that may change while the
// process runs: a certificate and its key (Certificate, for
// tls.Config.GetCertificate) and a pool of CA certificates (Pool, for
// verifying client certificates). Operators and cert-manager rotate
// certificates by writing new files over the old ones (or by swapping a
// symlink, as Kubernetes does for a mounted Secret); the next handshake after
// the change sees the new material, without a restart.
//
// The files are read on the handshake path at most once per Options.Every
// (default one second), and parsed only when their contents changed:
// comparing contents rather than modification times also sees a rewrite
// within the file system's timestamp granularity, and reading a few
// kilobytes a second costs nothing next to the handshakes that trigger it.
// A change that does not load — a half-written file, a certificate whose key
// is not written yet, a file that vanished — keeps the material last loaded
// in service and is logged once; the next change is tried again.
package tlsreload
