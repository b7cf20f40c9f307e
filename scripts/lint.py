#!/usr/bin/env python3
"""clang-tidy over the production code, one process per translation unit, JOBS at a time.

Used by scripts/lint.sh (which finds the tools and says what to do on failure). With
--changed, a translation unit is skipped when a clean run of exactly its text is recorded in
the cache: the key is a SHA-256 over clang-tidy's version, .clang-tidy, the compile command
(the checkout's and the build directory's paths taken out, so another clone of the same commit
matches), the file, every header of the checkout it includes (their text: from the build's
dependency records, `ninja -t deps`) and the path, size and mtime of every other header it
includes (system headers: a package upgrade changes them). A unit the build has no
dependency record for yet is always linted. Every unit found clean is recorded, in both modes,
so `make lint` (all units) also fills the cache that `make test` (--changed) reads.

Usage: lint.py --tidy CLANG_TIDY --build BUILD_DIR --root ROOT --files REGEX --jobs N
               [--changed] [--cache DIR]
Prints clang-tidy's findings; exit status 1 when any unit has a finding or failed.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys


def ninja_deps(build):
    """{object path relative to build: [dependency paths]} from `ninja -t deps`."""
    try:
        out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    deps, current = {}, None
    for line in out.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            obj, _, status = line.partition(":")
            current = obj if "VALID" in status and "STALE" not in status else None
            if current is not None:
                deps[current] = []
        elif current is not None:
            deps[current].append(line.strip())
    return deps


def unit_key(entry, deps, root, build, common):
    command = entry.get("command") or " ".join(entry.get("arguments", []))
    # The object: the entry's "output" where CMake writes it, else the command's -o.
    obj = entry.get("output")
    if not obj:
        m = re.search(r"(?:^|\s)-o\s+(\S+)", command)
        obj = m.group(1) if m else None
    if not obj or obj not in deps:
        return None
    h = hashlib.sha256(common)
    h.update(command.replace(build, "<build>").replace(root, "<root>").encode())
    src = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    for path in [src] + deps[obj]:
        path = os.path.realpath(os.path.join(build, path))
        try:
            if path.startswith(root + os.sep):
                with open(path, "rb") as f:
                    h.update(b"F" + os.path.relpath(path, root).encode() + b"\0")
                    h.update(hashlib.sha256(f.read()).digest())
            else:
                st = os.stat(path)
                h.update(b"S%s\0%d\0%d\0" % (path.encode(), st.st_size, st.st_mtime_ns))
        except OSError:
            return None  # a dependency went away: lint it
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidy", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--files", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--changed", action="store_true")
    ap.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "taint-eviction-controller", "lint"))
    args = ap.parse_args()
    root = os.path.realpath(args.root)
    build = os.path.realpath(args.build)
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    pattern = re.compile(args.files)
    units = {}
    for e in entries:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if pattern.search(path):
            units[path] = e
    version = subprocess.run([args.tidy, "--version"], capture_output=True, text=True).stdout
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        common = version.encode() + b"\0" + f.read() + b"\0"
    deps = ninja_deps(build)
    keys = {p: unit_key(e, deps, root, build, common) for p, e in units.items()}
    os.makedirs(args.cache, exist_ok=True)
    todo = sorted(p for p in units
                  if not (args.changed and keys[p]
                          and os.path.exists(os.path.join(args.cache, keys[p]))))
    print(f"lint: {len(todo)} of {len(units)} translation units to check"
          + (" (the others have a clean run recorded)" if args.changed else ""), flush=True)

    def run(path):
        r = subprocess.run([args.tidy, "-p", build, "--quiet", path], capture_output=True,
                           text=True)
        return path, r.returncode, r.stdout + r.stderr

    noise = re.compile(r"^(\d+ warnings? generated\.|Suppressed \d+ warnings.*|"
                       r"Use -header-filter=.*|\d+ warnings? treated as errors?)$")
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for path, rc, output in pool.map(run, todo):
            lines = [l for l in output.splitlines() if not noise.match(l.strip())]
            findings = any(": warning: " in l or ": error: " in l for l in lines)
            if rc != 0 or findings:
                failed += 1
                print(f"lint: {os.path.relpath(path, root)}:", flush=True)
                print("\n".join(lines), flush=True)
            elif keys[path]:
                open(os.path.join(args.cache, keys[path]), "w").close()
    if failed:
        print(f"lint: {failed} translation unit(s) with findings", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
