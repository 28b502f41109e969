#!/usr/bin/env bash
# Makes the release of version VERSION from a clean checkout of its tag: what an operator
# installs without cargo.
#
#   deploy/release.sh VERSION [--binary PATH] [--out DIR]
#
# Checks first, and stops on the first that fails: VERSION is semver (X.Y.Z); the
# workspace's version in Cargo.toml is VERSION; git tag vVERSION exists and is the
# checked-out commit, with no uncommitted change; CHANGELOG.md has a "## VERSION" section
# (its upgrade notes). Then writes into DIR (default target/release-VERSION):
#
#   health-orchestrator-VERSION-x86_64-linux.tar.gz   the binary (debug sections stripped),
#                                                     README, CHANGELOG, docs, example configs
#   health-orchestrator-VERSION.oci.tar               the container image (deploy/image/build.sh)
#   health-orchestrator-VERSION-kubernetes.yaml       deploy/kubernetes rendered, the image
#                                                     named with VERSION
#   SHA256SUMS
#
# Without --binary it builds the optimised binary (cargo build --profile dist --locked).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${1:-}"
shift || true
binary="" out=""
while (( $# )); do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1 (expected VERSION [--binary PATH] [--out DIR])" >&2; exit 2 ;;
  esac
done
fail() { echo "release $version: $*" >&2; exit 1; }
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "not a version: write X.Y.Z (semver)"
cargo_version="$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)"
[[ $cargo_version == "$version" ]] || fail "Cargo.toml's workspace version is $cargo_version: set it to $version and commit"
grep -q "^## $version\b" "$repo/CHANGELOG.md" || fail "CHANGELOG.md has no \"## $version\" section: write what changed and the upgrade notes"
tag_commit="$(git -C "$repo" rev-parse -q --verify "refs/tags/v$version^{commit}")" ||
  fail "no git tag v$version: tag the commit (git tag -a v$version -m $version)"
[[ $tag_commit == "$(git -C "$repo" rev-parse HEAD)" ]] || fail "tag v$version is not the checked-out commit: check it out"
[[ -z "$(git -C "$repo" status --porcelain)" ]] || fail "uncommitted changes: a release is made from its tag as committed"
for tool in tar sha256sum objcopy kubectl; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done

out="${out:-$repo/target/release-$version}"
mkdir -p "$out"
if [[ -z $binary ]]; then
  (cd "$repo" && cargo build --profile dist --locked --bin health-orchestrator)
  binary="$repo/target/dist/health-orchestrator"
fi
[[ -x $binary ]] || fail "$binary is not an executable"

name="health-orchestrator-$version"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin" "$stage/$name/config"
objcopy --strip-debug "$binary" "$stage/$name/bin/health-orchestrator"
cp "$repo/README.md" "$repo/CHANGELOG.md" "$stage/$name/"
cp -r "$repo/docs" "$stage/$name/docs"
cp "$repo"/config/examples/*.toml "$stage/$name/config/"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -czf "$out/$name-x86_64-linux.tar.gz" "$name"

image="ghcr.io/health-orchestrator/health-orchestrator:$version"
"$repo/deploy/image/build.sh" --binary "$binary" --out "$out/$name.oci.tar" --name "$image" >/dev/null

# The manifests name the image of this version, whatever the checked-in tag says.
kubectl kustomize "$repo/deploy/kubernetes" |
  sed "s#image: ghcr.io/health-orchestrator/health-orchestrator:.*#image: $image#" >"$out/$name-kubernetes.yaml"
grep -q "image: $image" "$out/$name-kubernetes.yaml" || fail "the rendered manifests name no orchestrator image"

(cd "$out" && sha256sum "$name-x86_64-linux.tar.gz" "$name.oci.tar" "$name-kubernetes.yaml" >SHA256SUMS)
echo "release $version: $out"
