#!/usr/bin/env bash
# Builds the Kubernetes control plane the tests start (internal/testing/kubetest):
# etcd, kube-apiserver and kube-controller-manager, from the Go modules pinned
# in hack/etcdbin and hack/k8sbins, once, into
#   $HOME/.cache/llmdiag/k8sbins/<key>
# where <key> names the Kubernetes and etcd versions and the Go version, and
# ends with a hash of the two build modules' go.mod and go.sum (so any change
# to what is built builds again into a new directory). Prints that directory
# on stdout (progress goes to stderr); does nothing but print it when the
# binaries are there.
#
# Cold cost on 2 shared cores: about 10 minutes, 0.74 GB of modules in the
# module cache and 3.7 GB of build cache, which goes to a throwaway GOCACHE
# deleted at the end; the three binaries (stripped) take 249 MB.
# CONTRIBUTING.md has the numbers.
#
#   scripts/k8sbins.sh            build if missing, print the directory
#   scripts/k8sbins.sh -n         print the directory only (exit 1 if not built)
#   scripts/k8sbins.sh -f         build again even if present
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mode=build
case "${1:-}" in
  -n) mode=print ;;
  -f) mode=force ;;
  "") ;;
  *) echo "usage: $0 [-n|-f]" >&2; exit 2 ;;
esac

k8smod=$root/hack/k8sbins
etcdmod=$root/hack/etcdbin
k8s_version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$k8smod/go.mod")
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$etcdmod/go.mod")
go_version=$(cd "$root" && go env GOVERSION)
# The same key internal/testing/kubetest computes (kubetest.CacheKey).
sum=$(cat "$k8smod/go.mod" "$k8smod/go.sum" "$etcdmod/go.mod" "$etcdmod/go.sum" | sha256sum | cut -c1-12)
key="k8s-$k8s_version-etcd-$etcd_version-$go_version-$sum"
dir=$HOME/.cache/llmdiag/k8sbins/$key
bins=(etcd kube-apiserver kube-controller-manager)

have() {
  local b
  for b in "${bins[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if [ "$mode" = print ]; then
  echo "$dir"
  have
  exit
fi
if [ "$mode" = build ] && have; then
  echo "$dir"
  exit 0
fi

start=$(date +%s)
step() { echo "k8sbins: [$(( $(date +%s) - start ))s] $*" >&2; }

mkdir -p "$(dirname "$dir")"
stage=$(mktemp -d "$dir.tmp.XXXXXX")
gocache=$(mktemp -d /tmp/llmdiag-k8sbins-gocache.XXXXXX)
trap 'rm -rf "$stage" "$gocache"' EXIT
export GOCACHE=$gocache GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off

step "building into $dir (Kubernetes $k8s_version, etcd $etcd_version, $go_version; throwaway GOCACHE $gocache)"
# go list -deps fetches exactly the modules the builds need (a bare
# go mod download would fetch the whole module graph).
step "downloading the modules hack/etcdbin and hack/k8sbins build from (module cache $(go env GOMODCACHE))"
(cd "$etcdmod" && go list -deps go.etcd.io/etcd/server/v3 >/dev/null)
(cd "$k8smod" && go list -deps tool >/dev/null)

step "building etcd $etcd_version"
(cd "$etcdmod" && go build -trimpath -o "$stage/etcd" go.etcd.io/etcd/server/v3)

minor=${k8s_version#v*.}
minor=${minor%%.*}
major=${k8s_version#v}
major=${major%%.*}
ld=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
step "building kube-apiserver and kube-controller-manager $k8s_version"
(cd "$k8smod" && go build -trimpath -ldflags "-s -w$ld" -o "$stage/" tool)

for b in "${bins[@]}"; do
  [ -x "$stage/$b" ] || { echo "k8sbins: $b was not built" >&2; exit 1; }
done
chmod 755 "$stage"
rm -rf "$dir"
mv "$stage" "$dir"
step "done: $(du -sh "$dir" | cut -f1) of binaries in $dir; deleting $(du -sh "$gocache" | cut -f1) of build cache"
echo "$dir"
