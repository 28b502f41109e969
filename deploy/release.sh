#!/usr/bin/env bash
# Makes the release of version VERSION from a clean checkout of its tag, or a snapshot of
# whatever commit is checked out: what an operator installs without cargo.
#
#   deploy/release.sh VERSION     [--binary PATH] [--out DIR]
#   deploy/release.sh --snapshot  [--binary PATH] [--out DIR]
#
# A release checks first, and stops on the first that fails: VERSION is semver (X.Y.Z); the
# workspace's version in Cargo.toml is VERSION; git tag vVERSION exists and is the
# checked-out commit, with no uncommitted change; CHANGELOG.md has a "## VERSION" section
# (its upgrade notes). A snapshot checks none of that: its version is Cargo.toml's with
# "-snapshot.COMMIT" after it (the short commit, and ".dirty" when the work tree has
# uncommitted changes). Then it writes into DIR (default target/release-VERSION), NAME being
# health-orchestrator-VERSION (deploy/README.md, "Release artifacts", says what each holds):
#
#   NAME-x86_64-linux.tar.gz   the binary (debug sections stripped), README, CHANGELOG, docs,
#                              example configs, deploy/ (systemd, manifests and their overlays,
#                              monitoring, CoreDNS snippets) naming this version's image, the SBOM
#   NAME.oci.tar               the container image (deploy/image/build.sh)
#   NAME-kubernetes.yaml       deploy/kubernetes rendered, the image named with VERSION
#   NAME.cdx.json              the SBOM: CycloneDX 1.5, every package of Cargo.lock (deploy/sbom.py)
#   SHA256SUMS
#
# Without --binary it builds the optimised binary with its dependency list embedded
# (cargo auditable build --profile dist --locked; cargo install --locked cargo-auditable).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image_repo="ghcr.io/health-orchestrator/health-orchestrator"
version="" snapshot=false binary="" out=""
while (( $# )); do
  case "$1" in
    --snapshot) snapshot=true; shift ;;
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -*) echo "unknown argument: $1 (expected VERSION or --snapshot, [--binary PATH] [--out DIR])" >&2; exit 2 ;;
    *) [[ -z $version ]] || { echo "one VERSION only, not also $1" >&2; exit 2; }; version="$1"; shift ;;
  esac
done
fail() { echo "release ${version:-snapshot}: $*" >&2; exit 1; }
cargo_version="$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)"
commit="$(git -C "$repo" rev-parse HEAD)"
dirty="$(git -C "$repo" status --porcelain)"
if $snapshot; then
  [[ -z $version ]] || fail "--snapshot takes no VERSION: it is Cargo.toml's ($cargo_version) and the commit"
  version="$cargo_version-snapshot.$(git -C "$repo" rev-parse --short HEAD)${dirty:+.dirty}"
else
  [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "not a version: write X.Y.Z (semver), or --snapshot"
  [[ $cargo_version == "$version" ]] || fail "Cargo.toml's workspace version is $cargo_version: set it to $version and commit"
  grep -q "^## $version\b" "$repo/CHANGELOG.md" || fail "CHANGELOG.md has no \"## $version\" section: write what changed and the upgrade notes"
  tag_commit="$(git -C "$repo" rev-parse -q --verify "refs/tags/v$version^{commit}")" ||
    fail "no git tag v$version: tag the commit (git tag -a v$version -m $version)"
  [[ $tag_commit == "$commit" ]] || fail "tag v$version is not the checked-out commit: check it out"
  [[ -z $dirty ]] || fail "uncommitted changes: a release is made from its tag as committed (or make a --snapshot)"
fi
for tool in tar sha256sum objcopy objdump kubectl python3 cargo; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done

out="${out:-$repo/target/release-$version}"
mkdir -p "$out"
if [[ -z $binary ]]; then
  cargo auditable --version >/dev/null 2>&1 ||
    fail "cargo-auditable is missing (it embeds the dependency list scanners read): cargo install --locked cargo-auditable"
  (cd "$repo" && cargo auditable build --profile dist --locked --bin health-orchestrator)
  binary="${CARGO_TARGET_DIR:-$repo/target}/dist/health-orchestrator"
fi
[[ -x $binary ]] || fail "$binary is not an executable"
if ! objdump -h "$binary" | grep -q '\.dep-v0'; then
  $snapshot || fail "$binary carries no dependency list (.dep-v0): build it with cargo auditable, or leave out --binary"
  echo "release $version: $binary carries no dependency list (.dep-v0); scanners read the SBOM only" >&2
fi

name="health-orchestrator-$version"
image="$image_repo:$version"
epoch="$(git -C "$repo" log -1 --format=%ct)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"

(cd "$repo" && cargo metadata --format-version 1 --locked) |
  python3 "$repo/deploy/sbom.py" "$repo/Cargo.lock" "$commit" "$epoch" >"$out/$name.cdx.json"

mkdir -p "$root/bin" "$root/config" "$root/deploy"
objcopy --strip-debug "$binary" "$root/bin/health-orchestrator"
cp "$repo/README.md" "$repo/CHANGELOG.md" "$root/"
cp "$out/$name.cdx.json" "$root/sbom.cdx.json"
cp -r "$repo/docs" "$root/docs"
cp "$repo"/config/examples/*.toml "$root/config/"
# Everything an install reads, every overlay included; the image and release scripts need
# the source tree instead.
for part in "$repo"/deploy/*; do
  case "${part##*/}" in
    image | release.sh | sbom.py) ;;
    *) cp -r "$part" "$root/deploy/" ;;
  esac
done
# The manifests name the image of this version, whatever the checked-in tag says.
kustomization="$root/deploy/kubernetes/kustomization.yaml"
! grep -q '^images:' "$kustomization" || fail "deploy/kubernetes/kustomization.yaml names images itself: set the release's there instead"
printf 'images:\n  - name: %s\n    newTag: "%s"\n' "$image_repo" "$version" >>"$kustomization"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -czf "$out/$name-x86_64-linux.tar.gz" "$name"

"$repo/deploy/image/build.sh" --binary "$binary" --out "$out/$name.oci.tar" --name "$image" >/dev/null

kubectl kustomize "$root/deploy/kubernetes" >"$out/$name-kubernetes.yaml"
grep -q "image: $image$" "$out/$name-kubernetes.yaml" || fail "the rendered manifests name no orchestrator image $image"

(cd "$out" && sha256sum "$name-x86_64-linux.tar.gz" "$name.oci.tar" "$name-kubernetes.yaml" "$name.cdx.json" >SHA256SUMS)
echo "release $version: $out"
