package cli

import "flag"

// ServeFlagSet returns the flags `llmdiag serve` takes, defined with their
// defaults and not parsed, for checking configuration written elsewhere
// (deploy/'s manifests) against the binary's own flags.
func ServeFlagSet() *flag.FlagSet { return serveCommand(Env{}).FlagSet }
