#!/usr/bin/env bash
# Builds the Prometheus server the tests run when they need Kubernetes
# service discovery (internal/testing/promtest.KubernetesSD), which the
# Debian package leaves out: cmd/prometheus at the version hack/prombin pins,
# with the file, http and kubernetes discovery mechanisms only (build tags
# remove_all_sd,enable_kubernetes_sd), once, into
#   $HOME/.cache/llmdiag/prombin/<key>/prometheus
# where <key> names the Prometheus module's and Go's versions and ends with a
# hash of hack/prombin's go.mod and go.sum. Prints that directory on stdout
# (progress goes to stderr); does nothing but print it when it is built.
#
# Cold cost on 2 shared cores: about 3 minutes with the module cache warm
# from llmdiag's own build (the build cache is the usual GOCACHE: most of
# what it compiles llmdiag compiles too); the binary (stripped) is 73 MB.
#
#   scripts/prombin.sh            build if missing, print the directory
#   scripts/prombin.sh -n         print the directory only (exit 1 if not built)
#   scripts/prombin.sh -f         build again even if present
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mode=build
case "${1:-}" in
  -n) mode=print ;;
  -f) mode=force ;;
  "") ;;
  *) echo "usage: $0 [-n|-f]" >&2; exit 2 ;;
esac

mod=$root/hack/prombin
version=$(awk '$1=="github.com/prometheus/prometheus"{print $2; exit}' "$mod/go.mod")
go_version=$(cd "$root" && go env GOVERSION)
# The same key internal/testing/promtest computes (promtest.KubernetesSDDir).
sum=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
dir=$HOME/.cache/llmdiag/prombin/prometheus-$version-$go_version-$sum

if [ "$mode" = print ]; then
  echo "$dir"
  [ -x "$dir/prometheus" ]
  exit
fi
if [ "$mode" = build ] && [ -x "$dir/prometheus" ]; then
  echo "$dir"
  exit 0
fi

start=$(date +%s)
step() { echo "prombin: [$(( $(date +%s) - start ))s] $*" >&2; }
mkdir -p "$(dirname "$dir")"
stage=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$stage"' EXIT
export GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off
tags=remove_all_sd,enable_kubernetes_sd

step "building Prometheus (module $version, $go_version) into $dir"
(cd "$mod" && go build -trimpath -tags "$tags" \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Branch=$tags" \
  -o "$stage/prometheus" github.com/prometheus/prometheus/cmd/prometheus)
chmod 755 "$stage"
rm -rf "$dir"
mv "$stage" "$dir"
step "done: $(du -sh "$dir" | cut -f1) in $dir"
echo "$dir"
