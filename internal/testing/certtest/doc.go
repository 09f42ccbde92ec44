// Package certtest makes X.509 certificates for tests with crypto/x509: a
// certificate authority, server certificates for 127.0.0.1 and localhost,
// and client certificates, each as parsed certificates, PEM and files, so
// that tests of TLS and mTLS need no fixtures that expire.
package certtest
