#!/usr/bin/env bash
# Installs what `make test` needs and a fresh machine lacks. Go modules and the
# pinned code generators come through the module proxy on first build; this
# script only checks the Go toolchain and fetches modules up front so a
# failure names its cause.
set -euo pipefail
if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is not on PATH; install Go 1.26 (expected at /usr/local/go/bin)" >&2
  exit 1
fi
go mod download
