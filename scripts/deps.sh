#!/usr/bin/env bash
# Installs what `make test` needs and a fresh machine lacks: Go modules (and
# the pinned code generators) through the module proxy, and Debian's
# prometheus and redis-server (with redis-cli) for the integration tests that
# start a real Prometheus and real Redis servers. Installs
# only what is missing, so a prepared machine pays nothing.
set -euo pipefail
if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is not on PATH; install Go 1.26 (expected at /usr/local/go/bin)" >&2
  exit 1
fi
go mod download

missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  missing+=(redis-server) # Debian's redis-server depends on redis-tools (redis-cli)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian starts the packaged service; tests start their own instances.
  for svc in prometheus redis-server; do
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
    service "$svc" stop >/dev/null 2>&1 || true # no systemd (containers)
  done
fi
