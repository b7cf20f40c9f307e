#!/usr/bin/env python3
"""clang-tidy over the production code, one process per translation unit, JOBS at a time.

Used by scripts/lint.sh (which finds the tools and says what to do on failure). Each unit has
a key: a SHA-256 over clang-tidy's version, .clang-tidy, the compile command (the checkout's
and the build directory's paths taken out), and the path and text of the file and of every
header it includes (from the build's dependency records, `ninja -t deps`). A system header
that a Debian package installed counts by its path, the package and the major and minor of
the package's upstream version (1.81 of 1.81.0-5+deb12u1, 6.1 of linux-libc-dev's 6.1.192-3,
3.0 of libssl-dev's 3.0.22-1~deb12u2): a security or patch update, of Debian's revision or of
upstream's patch level, leaves every key as it was (it fixes code clang-tidy reports nothing
in: the header filter shows only the project's own headers), while a new release (Boost 1.83,
GCC 13, OpenSSL 3.1) changes every key that includes it. Keyed by the whole upstream version,
linux-libc-dev 6.1.187 -> 6.1.192 and libssl-dev 3.0.19 -> 3.0.22 (the kernel headers are in
most units through the C library's) sent all 94 units to lint again on a new machine. A header no package owns counts by its text. The key depends on nothing of
the machine but what clang-tidy reads, so another clone, or another machine with the same
packages, computes the same key for the same text. A unit the build has no dependency record
for yet has no key and is always linted.

Two records of clean runs, both sets of keys:
- the committed one, scripts/lint-clean.txt: written by a full run (`make lint`, no
  --changed) with the keys of every unit it found clean, so a clean clone (CI) skips every unit
  unchanged since the last `make lint` that was committed;
- the machine's, a file per key under --cache: every unit found clean in either mode.
With --changed (`make test`), a unit whose key is in either record is skipped. Units run
longest first (the largest files first), so the last one does not run alone.

Usage: lint.py --tidy CLANG_TIDY --build BUILD_DIR --root ROOT --files REGEX --jobs N
               [--changed [--write-record]] [--cache DIR] [--record FILE]
--changed --write-record (`make lint-changed`) rewrites the committed record as a full run
would, at the cost of the changed units only, when every unit is clean: a unit skipped has a
key on record, that is, a clean run of the same text.
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


def file_digest(path, memo):
    """SHA-256 of a file's bytes, once per path per run (units share most headers)."""
    if path not in memo:
        with open(path, "rb") as f:
            memo[path] = hashlib.sha256(f.read()).digest()
    return memo[path]


def release_of(version):
    """The major and minor of a Debian version's upstream part: its epoch ("1:") and revision
    (after the last '-') taken off, then what follows the second dot or a '+' or '~'
    ("1:14.0.6-12" -> "14.0", "3.0.22-1~deb12u2" -> "3.0", "1.10.0+ds-0.4" -> "1.10")."""
    upstream = version.split(":", 1)[1] if ":" in version else version
    upstream = upstream.rsplit("-", 1)[0] if "-" in upstream else upstream
    upstream = re.split(r"[+~]", upstream, maxsplit=1)[0]
    return ".".join(upstream.split(".")[:2])


class DebianPackages:
    """Which Debian package installed a file, and that package's upstream version."""

    def __init__(self, info="/var/lib/dpkg/info"):
        self.info = info
        self.owner = None
        self.version = None

    def _load(self):
        self.owner, self.version = {}, {}
        try:
            names = os.listdir(self.info)
        except OSError:
            names = []
        for name in names:
            if not name.endswith(".list"):
                continue
            try:
                with open(os.path.join(self.info, name), errors="replace") as f:
                    for line in f:
                        self.owner.setdefault(line.rstrip("\n"), name[:-len(".list")])
            except OSError:
                continue
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f", "${binary:Package} ${Version}\n"],
                                 capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            out = ""
        for line in out.splitlines():
            package, _, version = line.partition(" ")
            self.version[package] = release_of(version)

    def identity(self, *paths):
        """b"package upstream-version" of the first of paths a package owns, else None."""
        if self.owner is None:
            self._load()
        for path in paths:
            package = self.owner.get(path)
            if package is not None and package in self.version:
                return f"{package} {self.version[package]}".encode()
        return None


def command_of(entry):
    return entry.get("command") or " ".join(entry.get("arguments", []))


def object_of(entry):
    """The object: the entry's "output" where CMake writes it, else the command's -o."""
    obj = entry.get("output")
    if not obj:
        m = re.search(r"(?:^|\s)-o\s+(\S+)", command_of(entry))
        obj = m.group(1) if m else None
    return obj


def unit_key(entry, deps, root, build, common, memo, packages):
    command = command_of(entry)
    obj = object_of(entry)
    if not obj or obj not in deps:
        return None
    h = hashlib.sha256(common)
    h.update(command.replace(build, "<build>").replace(root, "<root>").encode())
    src = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    for dep in [src] + deps[obj]:
        written = os.path.normpath(os.path.join(build, dep))
        path = os.path.realpath(written)
        if path.startswith(root + os.sep):
            name = b"F" + os.path.relpath(path, root).encode()
            identity = None
        else:
            name = b"S" + path.encode()
            identity = packages.identity(written, path)
        try:
            if not os.path.exists(path):
                return None  # a dependency went away: lint it
            h.update(name + b"\0" + (b"P" + identity if identity else file_digest(path, memo)))
        except OSError:
            return None
    return h.hexdigest()


def read_record(path):
    """The keys of a record file (a key and the unit's path per line; # starts a comment)."""
    try:
        with open(path) as f:
            return {l.split()[0] for l in f if l.strip() and not l.startswith("#")}
    except OSError:
        return set()


def write_record(path, clean, root):
    """Writes the committed record: the key and path of every unit found clean, by path."""
    lines = [f"{key} {os.path.relpath(unit, root)}\n" for unit, key in sorted(clean.items())]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# clang-tidy's clean runs, written by `make lint` (scripts/lint.py says what a\n"
                "# key covers). `make test` skips a unit whose key is here. Commit it after a\n"
                "# clean `make lint`; a stale line only means that unit is checked again.\n")
        f.writelines(lines)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidy", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--files", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--changed", action="store_true")
    ap.add_argument("--write-record", action="store_true",
                    help="with --changed: rewrite the committed record too, when every unit "
                    "is clean (checked now, or its key on record: the same text)")
    ap.add_argument("--files-narrowed", action="store_true",
                    help="--files is narrower than the production code: leave the record alone")
    ap.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "taint-eviction-controller", "lint"))
    ap.add_argument("--record", help="the committed record (default: lint-clean.txt beside "
                    "this script)")
    args = ap.parse_args()
    record = args.record or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "lint-clean.txt")
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
    memo = {}
    packages = DebianPackages()
    keys = {p: unit_key(e, deps, root, build, common, memo, packages) for p, e in units.items()}
    os.makedirs(args.cache, exist_ok=True)
    committed = read_record(record)

    def recorded(path):
        key = keys[path]
        return key and (key in committed or os.path.exists(os.path.join(args.cache, key)))

    todo = [p for p in units if not (args.changed and recorded(p))]
    # Longest first: clang-tidy's static analyzer, most of its time, analyses the functions of
    # the file itself, so the largest files take the longest.
    todo.sort(key=lambda p: (-os.path.getsize(p), p))
    print(f"lint: {len(todo)} of {len(units)} translation units to check"
          + (" (the others have a clean run recorded)" if args.changed else ""), flush=True)

    def run(path):
        r = subprocess.run([args.tidy, "-p", build, "--quiet", path], capture_output=True,
                           text=True)
        return path, r.returncode, r.stdout + r.stderr

    noise = re.compile(r"^(\d+ warnings? generated\.|Suppressed \d+ warnings.*|"
                       r"Use -header-filter=.*|\d+ warnings? treated as errors?)$")
    failed = 0
    clean = {p: keys[p] for p in units if p not in todo and keys[p]}
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
                clean[path] = keys[path]
    complete = not failed and len(clean) == len(units)
    if not args.files_narrowed and (not args.changed or (args.write_record and complete)):
        write_record(record, clean, root)
    elif args.write_record and not complete:
        print("lint: the record is left alone: not every unit is clean or has a key", flush=True)
    if failed:
        print(f"lint: {failed} translation unit(s) with findings", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
