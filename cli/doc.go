// Package cli is llmdiag's command line: `serve` runs the service, `sim` runs
// the fleet simulator, and `nodes`, `metrics`, `diagnose`, `compare` and
// `watch` are thin users of package client for people and chatops. Every
// flag has an LLMDIAG_* environment equivalent (flag --stale-after is
// LLMDIAG_STALE_AFTER); a flag given on the command line wins. The client
// commands' shared flags (--addr, --token, --protocol, --timeout, and the
// TLS files --ca, --cert, --key) are global: defined on the root command
// too, bound to the same values, they may come before the command name or
// after it.
package cli
