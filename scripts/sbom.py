#!/usr/bin/env python3
"""scripts/sbom.py: a CycloneDX 1.5 JSON SBOM of the runtime image (make release).

Reads a root filesystem as deploy/image-rootfs.sh lays it out (the image's files, `images.sh
rootfs`): the Debian packages its files came from (/var/lib/dpkg/status.d/<package> and
<package>.md5sums), each listed with its version and its files in the image, and the binaries
given with --binary, each with its SHA-256 and what it is made of: the packages of the shared
libraries it loads (its ELF NEEDED closure, the dynamic loader included, resolved in the root
filesystem) and the header-only libraries compiled into it (Boost, nlohmann-json, CLI11), at
the versions of their Debian -dev packages: from the lock file the image was built with
(--compiled-in-lock deploy/image-packages.lock) or from this host's dpkg (--compiled-in-host).

Deterministic: no clock (the timestamp is SOURCE_DATE_EPOCH's, when set), components sorted,
the serial number derived from the content. Errors: one line on stderr, exit 1.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid

# The header-only libraries compiled into the binaries, by the Debian package that ships them.
COMPILED_IN = {
    "libboost1.81-dev": "Boost (Asio, Beast, URL, System: header-only)",
    "nlohmann-json3-dev": "nlohmann/json",
    "libcli11-dev": "CLI11",
}
STATUS_DIR = "var/lib/dpkg/status.d"
MAX_SYMLINKS = 40


class SbomError(Exception):
    pass


def read_packages(rootfs):
    """{name: {"version", "arch", "source", "files": [path, ...]}} from status.d."""
    base = os.path.join(rootfs, STATUS_DIR)
    if not os.path.isdir(base):
        raise SbomError(f"no {STATUS_DIR} in {rootfs} (not made by deploy/image-rootfs.sh)")
    packages = {}
    for entry in sorted(os.listdir(base)):
        if entry.endswith(".md5sums"):
            continue
        fields = {}
        with open(os.path.join(base, entry), encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep:
                    fields[key.strip()] = value.strip()
        if "Package" not in fields or "Version" not in fields:
            raise SbomError(f"{STATUS_DIR}/{entry}: no Package or Version field")
        files = []
        sums = os.path.join(base, entry + ".md5sums")
        if os.path.exists(sums):
            with open(sums, encoding="utf-8") as f:
                for line in f:
                    parts = line.rstrip("\n").split("  ", 1)
                    if len(parts) == 2:
                        files.append(parts[1])
        packages[fields["Package"]] = {
            "version": fields["Version"],
            "arch": fields.get("Architecture", ""),
            "source": fields.get("Source", ""),
            "files": sorted(files),
        }
    return packages


def resolve(rootfs, path):
    """PATH (absolute inside ROOTFS) with every symlink followed inside ROOTFS, relative to it;
    None when it does not exist there."""
    parts = [p for p in path.split("/") if p]
    done = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = os.path.join(rootfs, *done, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > MAX_SYMLINKS:
                raise SbomError(f"too many symlinks resolving {path} in {rootfs}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        if not os.path.lexists(candidate):
            return None
        done.append(part)
    return "/".join(done)


def elf_info(file):
    """(interpreter or None, [NEEDED sonames]) of an ELF file, from readelf."""
    try:
        out = subprocess.run(["readelf", "-W", "-l", "-d", file], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SbomError(f"readelf {file} failed: {e}") from e
    interp = re.search(r"Requesting program interpreter: ([^\]]+)\]", out)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    return (interp.group(1) if interp else None), needed


LIB_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib",
            "/lib64", "/usr/lib64"]


def closure(rootfs, binary):
    """The files (relative to ROOTFS, symlinks resolved) BINARY loads: loader and libraries."""
    seen = set()
    todo = [binary]
    result = set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        interp, needed = elf_info(os.path.join(rootfs, rel))
        wanted = [interp] if interp else []
        for soname in needed:
            for d in LIB_DIRS:
                if resolve(rootfs, f"{d}/{soname}"):
                    wanted.append(f"{d}/{soname}")
                    break
            else:
                raise SbomError(f"{binary}: {soname} not found in {rootfs}")
        for path in wanted:
            real = resolve(rootfs, path)
            if real is None:
                raise SbomError(f"{binary}: {path} not found in {rootfs}")
            result.add(real)
            todo.append(real)
    return sorted(result)


def sha256_of(file):
    h = hashlib.sha256()
    with open(file, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def compiled_in_versions(lock, host):
    """{package: version} of COMPILED_IN, from the lock file or this host's dpkg."""
    versions = {}
    if lock:
        with open(lock, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                name, sep, version = line.partition("=")
                if sep and name in COMPILED_IN:
                    versions[name] = version
    elif host:
        for name in COMPILED_IN:
            try:
                versions[name] = subprocess.run(
                    ["dpkg-query", "-W", "-f=${Version}", name], capture_output=True,
                    text=True, check=True).stdout.strip()
            except (OSError, subprocess.CalledProcessError):
                pass
    missing = sorted(set(COMPILED_IN) - {n for n, v in versions.items() if v})
    if missing:
        raise SbomError("no version for " + ", ".join(missing)
                        + (f" in {lock}" if lock else " in this host's dpkg"))
    return versions


def purl(name, version, arch, distro):
    q = f"?arch={arch}&distro={distro}" if arch else f"?distro={distro}"
    return f"pkg:deb/debian/{name}@{version.replace(':', '%3A').replace('+', '%2B')}{q}"


def build(args):
    rootfs = os.path.abspath(args.rootfs)
    packages = read_packages(rootfs)
    owner = {}
    for name, p in packages.items():
        for f in p["files"]:
            owner[f] = name
    components = []
    dependencies = []
    for name in sorted(packages):
        p = packages[name]
        components.append({
            "type": "library",
            "bom-ref": f"deb:{name}",
            "name": name,
            "version": p["version"],
            "purl": purl(name, p["version"], p["arch"], args.distro),
            "properties": [{"name": "tec:source-package", "value": p["source"]}]
            + [{"name": "tec:image-file", "value": "/" + f} for f in p["files"]],
        })
    versions = compiled_in_versions(args.compiled_in_lock, args.compiled_in_host)
    for name in sorted(COMPILED_IN):
        components.append({
            "type": "library",
            "bom-ref": f"compiled-in:{name}",
            "name": name,
            "version": versions[name],
            "description": COMPILED_IN[name] + ", compiled into the binaries",
            "purl": purl(name, versions[name], "", args.distro),
            "scope": "required",
            "properties": [{"name": "tec:linkage", "value": "compiled-in (header-only)"}],
        })
    for binary in sorted(args.binary):
        rel = binary.lstrip("/")
        file = os.path.join(rootfs, rel)
        if not os.path.isfile(file):
            raise SbomError(f"no file {rel} in {rootfs}")
        libs = closure(rootfs, rel)
        unowned = [f for f in libs if f not in owner]
        if unowned:
            raise SbomError(f"{rel}: no package in {STATUS_DIR} holds " + ", ".join(unowned))
        ref = f"file:/{rel}"
        components.append({
            "type": "application",
            "bom-ref": ref,
            "name": os.path.basename(rel),
            "version": args.version,
            "hashes": [{"alg": "SHA-256", "content": sha256_of(file)}],
            "properties": [{"name": "tec:image-file", "value": "/" + rel}]
            + [{"name": "tec:loads", "value": "/" + f} for f in libs],
        })
        deps = sorted({f"deb:{owner[f]}" for f in libs}) + [
            f"compiled-in:{n}" for n in sorted(COMPILED_IN)]
        dependencies.append({"ref": ref, "dependsOn": deps})
    image_ref = "image"
    dependencies.insert(0, {"ref": image_ref,
                            "dependsOn": sorted(c["bom-ref"] for c in components
                                                if c["bom-ref"].startswith(("deb:", "file:")))})
    metadata = {
        "tools": {"components": [{"type": "application", "name": "scripts/sbom.py"}]},
        "component": {"type": "container", "bom-ref": image_ref, "name": args.name,
                      "version": args.version},
    }
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        import datetime  # pylint: disable=import-outside-toplevel
        metadata["timestamp"] = datetime.datetime.fromtimestamp(
            int(epoch), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": metadata,
        "components": components,
        "dependencies": dependencies,
    }
    digest = hashlib.sha256(json.dumps(bom, sort_keys=True).encode()).hexdigest()
    bom["serialNumber"] = "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, "tec-sbom:" + digest))
    return bom


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rootfs", required=True, help="the image's files (images.sh rootfs)")
    ap.add_argument("--binary", action="append", required=True,
                    help="a binary in the image, e.g. /usr/local/bin/taint-eviction-controller")
    ap.add_argument("--name", default="taint-eviction-controller")
    ap.add_argument("--version", required=True, help="the release version (cmake/version.sh)")
    ap.add_argument("--distro", default="debian-12", help="the purl's distro qualifier")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--compiled-in-lock", metavar="LOCK",
                     help="versions of the header-only libraries: the image's package lock")
    src.add_argument("--compiled-in-host", action="store_true",
                     help="versions of the header-only libraries: this host's dpkg")
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args()
    try:
        bom = build(args)
    except (SbomError, OSError) as e:
        msg = str(e).replace("\n", " ")
        print(f"sbom.py: {msg[:500]}", file=sys.stderr)
        return 1
    text = json.dumps(bom, indent=2) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
