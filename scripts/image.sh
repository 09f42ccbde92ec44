#!/usr/bin/env bash
# Builds llmdiag's container image: the static binary (CGO_ENABLED=0,
# -trimpath, the version from git describe linked in) on an empty base
# (FROM scratch: nothing is pulled), run as 65532:65532, with this machine's
# CA bundle, written as an OCI archive (default bin/llmdiag-image.oci.tar,
# image name llmdiag, tag = the version). Offline and reproducible: the same
# commit, Go toolchain and CA bundle give the same bytes (every timestamp is
# the commit's time, SOURCE_DATE_EPOCH).
#
# buildah keeps its state in a temporary directory (vfs driver, its own
# storage.conf, registries.conf and policy.json) removed on exit, so neither
# the host's container configuration nor its image store is read or changed.
#
# Environment: OUT (archive path), VERSION (default: git describe --tags
# --always --dirty), GOARCH (default: the host's), SOURCE_DATE_EPOCH
# (default: the commit's time), GO (default: go), IMAGE_SOURCE (the
# org.opencontainers.image.source label). Used by `make image` and by
# internal/testing/imagetest.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
OUT=${OUT:-bin/llmdiag-image.oci.tar}
if ! command -v buildah >/dev/null 2>&1; then
  echo "image: buildah is not installed: run make deps (scripts/deps.sh) or apt-get install -y buildah" >&2
  exit 1
fi
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
GOARCH=${GOARCH:-$($GO env GOARCH)}
IMAGE_SOURCE=${IMAGE_SOURCE:-https://github.com/llmdiag/llmdiag}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# An OCI tag is at most 128 of [A-Za-z0-9_.-], not starting with . or -.
if ! [[ $VERSION =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "image: VERSION $VERSION is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})" >&2
  exit 1
fi
if ! [ -r "$CA_BUNDLE" ]; then
  echo "image: no CA bundle at $CA_BUNDLE: apt-get install -y ca-certificates" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/llmdiag-image.XXXXXX")
cleanup() {
  # vfs layers are plain directories: nothing is mounted, rm removes it all.
  rm -rf "$work"
}
trap cleanup EXIT

# The binary. -buildvcs=false: the version is linked in, and a build stamp
# of a dirty tree would make the bytes depend on more than the commit.
start=$(date +%s)
mkdir -p "$work/rootfs/etc/ssl/certs"
CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH $GO build -trimpath -buildvcs=false \
  -ldflags "-s -w -X github.com/llmdiag/llmdiag/cli.linkVersion=$VERSION" \
  -o "$work/rootfs/llmdiag" ./cmd/llmdiag
cp "$CA_BUNDLE" "$work/rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"$work/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$work/rootfs/etc/group"
built=$(date +%s)

# buildah's own configuration, so the host's does not matter.
mkdir -p "$work/storage/root" "$work/storage/run"
cat >"$work/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$work/storage/root"
runroot = "$work/storage/run"
EOF
# Images are read only from local storage and layouts: any registry is refused.
echo '{"default":[{"type":"reject"}],"transports":{"containers-storage":{"":[{"type":"insecureAcceptAnything"}]},"oci":{"":[{"type":"insecureAcceptAnything"}]}}}' >"$work/policy.json"
: >"$work/registries.conf"
: >"$work/containers.conf"
export CONTAINERS_STORAGE_CONF=$work/storage.conf CONTAINERS_REGISTRIES_CONF=$work/registries.conf \
  CONTAINERS_CONF=$work/containers.conf STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
b() { buildah --root "$work/storage/root" --runroot "$work/storage/run" --storage-driver vfs "$@"; }

ctr=$(b from --signature-policy "$work/policy.json" --name llmdiag-image scratch)
b add --chmod 0555 "$ctr" "$work/rootfs/llmdiag" /llmdiag >/dev/null
b add --chmod 0444 "$ctr" "$work/rootfs/etc/ssl/certs/ca-certificates.crt" /etc/ssl/certs/ca-certificates.crt >/dev/null
b add --chmod 0444 "$ctr" "$work/rootfs/etc/passwd" /etc/passwd >/dev/null
b add --chmod 0444 "$ctr" "$work/rootfs/etc/group" /etc/group >/dev/null
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
# The default command: serve on every interface, as a cluster runs it, so
# TLS and tokens are required (docs/security.md) and read from the mounts
# below; /metrics on its own plaintext port for Prometheus.
b config \
  --os linux --arch "$GOARCH" \
  --user 65532:65532 --workingdir / \
  --entrypoint '["/llmdiag"]' \
  --cmd '["serve", "--listen=:8443", "--health-listen=:8081", "--metrics-listen=:9090", "--fleet=/etc/llmdiag/config/fleet.yaml", "--tls-cert=/etc/llmdiag/tls/tls.crt", "--tls-key=/etc/llmdiag/tls/tls.key", "--auth-tokens=/etc/llmdiag/auth/tokens.yaml"]' \
  --port 8443/tcp --port 8081/tcp --port 9090/tcp \
  --stop-signal SIGTERM \
  --created-by "scripts/image.sh" \
  --label org.opencontainers.image.title=llmdiag \
  --label "org.opencontainers.image.description=Diagnoses LLM inference fleets (vLLM, SGLang, ...) from their Prometheus metrics; Connect, gRPC and gRPC-Web on one port" \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.revision=$REVISION" \
  --label "org.opencontainers.image.source=$IMAGE_SOURCE" \
  --label "org.opencontainers.image.created=$created" \
  "$ctr" >/dev/null

# Committed as an OCI layout, then archived with fixed names, owners and
# times (buildah's own oci-archive stamps the archive with the wall clock).
b commit --quiet --signature-policy "$work/policy.json" --identity-label=false \
  --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "oci:$work/layout:llmdiag:$VERSION" >/dev/null
mkdir -p "$(dirname "$OUT")"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  --mode=u+rw,go+r,go-w --format=gnu -C "$work/layout" -cf "$OUT.tmp" oci-layout index.json blobs
mv "$OUT.tmp" "$OUT"
done_=$(date +%s)
digest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$work/layout/index.json")
echo "image: llmdiag:$VERSION ($digest) in $OUT, $(stat -c %s "$OUT") bytes; go build $((built - start))s, image $((done_ - built))s"
