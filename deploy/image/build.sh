#!/usr/bin/env bash
# Builds the container image offline, with Debian's buildah: no base image is pulled, the
# image holds exactly what the binary needs (the binary, the shared libraries `ldd` names,
# CA certificates, passwd/group entries for the non-root user, an nsswitch.conf) and runs
# as 65532:65532 with nothing written to its root filesystem, so it suits
# `readOnlyRootFilesystem: true` as deploy/kubernetes sets it.
#
#   deploy/image/build.sh [--binary PATH] [--out FILE] [--name NAME:TAG]
#
# Without --binary it builds the optimised binary first (cargo build --profile dist --locked).
# The result is an OCI archive: load it with `podman load -i FILE`, push it with
# `skopeo copy oci-archive:FILE docker://REGISTRY/NAME:TAG`, or unpack it with umoci.
# buildah's storage lives in a temporary directory removed at the end, so the host's
# container storage is never touched.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)"
binary="" out="$repo/target/health-orchestrator-$version.oci.tar"
name="ghcr.io/health-orchestrator/health-orchestrator:$version"
while (( $# )); do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    *) echo "unknown argument: $1 (expected --binary PATH, --out FILE, --name NAME:TAG)" >&2; exit 2 ;;
  esac
done
for tool in buildah ldd objcopy; do
  command -v "$tool" >/dev/null || {
    echo "$tool is missing: install buildah (Debian: apt-get install buildah) and binutils" >&2; exit 1; }
done
certs=/etc/ssl/certs/ca-certificates.crt
[[ -f $certs ]] || { echo "$certs is missing: install ca-certificates" >&2; exit 1; }
if [[ -z $binary ]]; then
  (cd "$repo" && cargo build --profile dist --locked --bin health-orchestrator)
  binary="$repo/target/dist/health-orchestrator"
fi
[[ -x $binary ]] || { echo "$binary is not an executable" >&2; exit 1; }

work="$(mktemp -d)"
buildah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
cleanup() { "${buildah[@]}" rm --all >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
root="$work/rootfs"

# The binary without its debug sections (symbol names stay, so a panic's backtrace reads).
install -d "$root/usr/local/bin"
objcopy --strip-debug "$binary" "$root/usr/local/bin/health-orchestrator"
# Every shared library the dynamic loader resolves, and the loader itself, at its own path.
ldd "$binary" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]+ \(/ { print $1 }' |
  while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
  done
install -D -m 0644 "$certs" "$root$certs"
install -d "$root/etc/health-orchestrator" "$root/var/lib/health-orchestrator"
install -d -m 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
chown 65532:65532 "$root/var/lib/health-orchestrator"

container="$("${buildah[@]}" from scratch)"
"${buildah[@]}" add "$container" "$root" / >/dev/null
"${buildah[@]}" config \
  --entrypoint '["/usr/local/bin/health-orchestrator"]' \
  --cmd '["run", "--config", "/etc/health-orchestrator"]' \
  --user 65532:65532 --workingdir / \
  --port 8080/tcp --port 5353/udp --port 5353/tcp \
  --env SSL_CERT_FILE="$certs" \
  --label org.opencontainers.image.title=health-orchestrator \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --label org.opencontainers.image.source=https://github.com/health-orchestrator/health-orchestrator \
  "$container"
mkdir -p "$(dirname "$out")"
rm -f "$out"
"${buildah[@]}" commit --quiet --rm "$container" "oci-archive:$out:$name" >/dev/null
echo "$out ($name, $(du -h "$out" | cut -f1))"
