#!/usr/bin/env bash
# Installs what `make test` needs and a fresh machine lacks: Go modules (and
# the pinned code generators) through the module proxy, grpcurl (go install,
# for the TLS test that calls `llmdiag serve` with it), and Debian's
# prometheus, prometheus-alertmanager, redis-server (with redis-cli), curl,
# haproxy and caddy for the integration tests that start a real Prometheus, a
# real Alertmanager, real Redis servers, a real HAProxy and a real Caddy and
# call the service with curl, and
# chromium for the web console's browser tests (internal/testing/browsertest), and
# buildah for the container image (make image, internal/testing/imagetest),
# and the Kubernetes control plane internal/testing/kubetest starts (etcd,
# kube-apiserver, kube-controller-manager), built from Go modules by
# scripts/k8sbins.sh into $HOME/.cache/llmdiag/k8sbins (once: ~10 minutes),
# and a Prometheus with Kubernetes discovery (Debian's has none), built from
# hack/prombin by scripts/prombin.sh into $HOME/.cache/llmdiag/prombin (once:
# ~3 minutes).
# Installs only what is missing, so a prepared machine pays nothing.
set -euo pipefail
if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is not on PATH; install Go 1.26 (expected at /usr/local/go/bin)" >&2
  exit 1
fi
go mod download

# grpcurl: TestServeTLS (internal/testing/e2e/exposure) looks on PATH, then
# in $(go env GOPATH)/bin, where go install puts it when GOBIN is unset.
GRPCURL_VERSION=v1.9.3
if ! command -v grpcurl >/dev/null 2>&1 && ! [ -x "$(go env GOPATH)/bin/grpcurl" ] && ! { [ -n "$(go env GOBIN)" ] && [ -x "$(go env GOBIN)/grpcurl" ]; }; then
  echo "deps: installing grpcurl $GRPCURL_VERSION with go install"
  if ! go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"; then
    echo "deps: could not install grpcurl; install it (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION) onto PATH" >&2
    exit 1
  fi
fi

missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# Debian's binary is prometheus-alertmanager (internal/testing/amtest also takes
# alertmanager from PATH, or ALERTMANAGER_BIN).
if ! command -v prometheus-alertmanager >/dev/null 2>&1 && ! command -v alertmanager >/dev/null 2>&1; then
  missing+=(prometheus-alertmanager)
fi
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  missing+=(redis-server) # Debian's redis-server depends on redis-tools (redis-cli)
fi
command -v curl >/dev/null 2>&1 || missing+=(curl)
# internal/testing/e2e/haproxy runs haproxy from PATH (or LLMDIAG_HAPROXY).
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
# internal/testing/e2e/caddy runs caddy from PATH (or LLMDIAG_CADDY).
if [ -z "${LLMDIAG_CADDY:-}" ] && ! command -v caddy >/dev/null 2>&1; then
  missing+=(caddy)
fi
# internal/testing/browsertest runs /usr/bin/chromium headless (or LLMDIAG_CHROMIUM).
if [ -z "${LLMDIAG_CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ] && ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium)
fi
# make image and internal/testing/imagetest build and run the container image with buildah.
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian starts the packaged service; tests start their own instances.
  for svc in prometheus prometheus-alertmanager redis-server haproxy caddy; do
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
    service "$svc" stop >/dev/null 2>&1 || true # no systemd (containers)
  done
fi

# internal/testing/kubetest: etcd, kube-apiserver and kube-controller-manager,
# built from hack/etcdbin and hack/k8sbins (nothing prebuilt is downloaded);
# k8sbins.sh does nothing when they are already in its cache directory.
"$(dirname "$0")/k8sbins.sh" >/dev/null

# internal/testing/promtest.KubernetesSD: Prometheus with Kubernetes service
# discovery, built from hack/prombin; prombin.sh does nothing when it is
# already in its cache directory.
"$(dirname "$0")/prombin.sh" >/dev/null
