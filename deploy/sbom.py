#!/usr/bin/env python3
"""The release's SBOM: a CycloneDX 1.5 JSON document of every package in Cargo.lock.

    cargo metadata --format-version 1 --locked | deploy/sbom.py Cargo.lock COMMIT EPOCH >sbom.cdx.json

Made from `cargo metadata` (names, versions, licences, the dependency graph) and Cargo.lock
(the crates.io checksums), with nothing but Python's standard library, so a release needs
no SBOM tool installed. The root is the `health-orchestrator` package; every other package of
the lock file, the workspace's own crates too, is a component. COMMIT and EPOCH (the
commit's time, seconds) make the document reproducible: the same commit gives the same bytes.
"""

import json
import sys
import tomllib
import uuid
from datetime import datetime, timezone

ROOT = "health-orchestrator"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def bom_ref(package):
    """A stable reference: the purl for a registry crate, `workspace:` for a path one."""
    source = package.get("source")
    if source is None:
        return f"workspace:{package['name']}@{package['version']}"
    if source.startswith("git+"):
        return f"pkg:cargo/{package['name']}@{package['version']}?vcs_url={source[4:]}"
    return f"pkg:cargo/{package['name']}@{package['version']}"


def licence(expression):
    """Cargo's old `MIT/Apache-2.0` spelling as the SPDX expression it means."""
    return " OR ".join(part.strip() for part in expression.split("/"))


def component(package, checksums, kind):
    """The CycloneDX component of one cargo package."""
    entry = {
        "type": kind,
        "bom-ref": bom_ref(package),
        "name": package["name"],
        "version": package["version"],
    }
    if package.get("description"):
        entry["description"] = " ".join(package["description"].split())
    if package.get("license"):
        entry["licenses"] = [{"expression": licence(package["license"])}]
    if package.get("source") is not None:
        entry["purl"] = bom_ref(package)
    checksum = checksums.get((package["name"], package["version"]))
    if checksum:
        entry["hashes"] = [{"alg": "SHA-256", "content": checksum}]
    if package.get("repository"):
        entry["externalReferences"] = [{"type": "vcs", "url": package["repository"]}]
    return entry


def main(lock_path, commit, epoch):
    metadata = json.load(sys.stdin)
    with open(lock_path, "rb") as lock_file:
        lock = tomllib.load(lock_file)
    checksums = {
        (p["name"], p["version"]): p["checksum"]
        for p in lock["package"]
        if p.get("source") == CRATES_IO and "checksum" in p
    }
    packages = {p["id"]: p for p in metadata["packages"]}
    refs = {pid: bom_ref(p) for pid, p in packages.items()}
    root = next(p for p in packages.values() if p["name"] == ROOT and p.get("source") is None)
    components = [
        component(p, checksums, "library")
        for p in sorted(packages.values(), key=lambda p: (p["name"], p["version"], refs[p["id"]]))
        if p is not root
    ]
    dependencies = [
        {"ref": refs[node["id"]], "dependsOn": sorted({refs[d] for d in node["dependencies"]})}
        for node in sorted(metadata["resolve"]["nodes"], key=lambda n: refs[n["id"]])
    ]
    timestamp = datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": uuid.uuid5(uuid.NAMESPACE_URL, f"{ROOT}@{root['version']}+{commit}").urn,
        "version": 1,
        "metadata": {
            "timestamp": timestamp,
            "tools": {"components": [{"type": "application", "name": "deploy/sbom.py"}]},
            "component": component(root, checksums, "application"),
            "properties": [{"name": "git:commit", "value": commit}],
        },
        "components": components,
        "dependencies": dependencies,
    }
    json.dump(bom, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: cargo metadata --format-version 1 --locked | sbom.py CARGO_LOCK COMMIT EPOCH")
    main(*sys.argv[1:])
