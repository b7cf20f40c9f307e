#!/usr/bin/env bash
# The documentation cannot drift from the tree and the binaries (ctest docs.links, label unit):
# (a) every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md, SECURITY.md,
#     BENCHMARKS.md, docs/*.md and charts/*/README.md names a file that exists, and a #anchor
#     names a heading of that file (GitHub's slugs) or an HTML id/name in it;
# (b) every --flag written in backticks in README.md and docs/*.md (an inline code span that
#     starts with the flag, or a command line of ours: taint-eviction-controller ..., kubectl
#     taint-eviction ..., kubectl-taint_eviction ..., inline or in a fenced block) is one that
#     the daemon's or the plugin's --help prints, or one of the few flags of other programs
#     listed below;
# (c) every taint_eviction_controller_* metric name in those files is declared in the source
#     (the full name, or the name without the prefix as a string literal, in a .cpp/.hpp outside
#     tests/, bench/ and fuzz/).
# Usage: links_test.sh DAEMON_BINARY PLUGIN_BINARY. Standard library only (bash, python3).
# Where the binaries are not built (the sanitizer presets build the unit tests only), (a) and
# (c) run and the test then skips (exit 77) for (b).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
daemon=${1:?usage: links_test.sh DAEMON_BINARY PLUGIN_BINARY}
plugin=${2:?usage: links_test.sh DAEMON_BINARY PLUGIN_BINARY}
[[ $daemon == /* ]] || daemon=$PWD/$daemon
[[ $plugin == /* ]] || plugin=$PWD/$plugin
exec python3 - "$root" "$daemon" "$plugin" <<'PY'
import glob
import os
import re
import subprocess
import sys

root, daemon, plugin = sys.argv[1:4]
os.chdir(root)

# Flags of other programs that the docs write in backticks on their own. Commands of kubectl,
# helm, git, make, k3s and so on are not checked: only a span that starts with a flag, or a
# command line of ours, is.
NOT_OURS = {
    # kube-controller-manager: the switch, and what docs/switching-over.md says of older releases
    "--controllers", "--enable-taint-manager", "--feature-gates", "--pod-eviction-timeout",
    "--node-eviction-rate",
    # k3s and RKE2: where kube-controller-manager's arguments go
    "--kube-controller-manager-arg",
    # helm and kubectl, when a span starts with one of their flags
    "--set", "--create-namespace", "--field-selector",
}

LINKED = (["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md", "BENCHMARKS.md"]
          + sorted(glob.glob("docs/*.md")) + sorted(glob.glob("charts/*/README.md")))
LINKED = [f for f in LINKED if os.path.isfile(f)]
FLAG_DOCS = [f for f in ["README.md"] + sorted(glob.glob("docs/*.md")) if os.path.isfile(f)]
problems = []


def prose_lines(text):
    """(line number, line, in_fence) for every line; fences are ``` or ~~~ blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
                yield n, line, True
                continue
            if m.group(1).startswith(fence):
                fence = None
                yield n, line, True
                continue
        yield n, line, fence is not None


def code_spans(line):
    """The inline code spans of a line (backtick runs of equal length)."""
    return [m.group(2) for m in re.finditer(r"(`+)(.+?)\1", line)]


def without_code(line):
    return re.sub(r"(`+).+?\1", "", line)


def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                          # HTML tags
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        seen, found = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line, fenced in prose_lines(text):
            if fenced:
                continue
            m = re.match(r"\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
            for a in re.findall(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", line):
                found.add(a)
        anchor_cache[path] = found
    return anchor_cache[path]


# (a) links
links_checked = 0
for doc in LINKED:
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    for n, line, fenced in prose_lines(text):
        if fenced:
            continue
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", without_code(line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            links_checked += 1
            path, _, anchor = target.partition("#")
            dest = doc if path == "" else os.path.normpath(os.path.join(os.path.dirname(doc), path))
            if not os.path.exists(dest):
                problems.append(f"{doc}:{n}: link to {target}: {dest} does not exist")
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    problems.append(f"{doc}:{n}: link to {target}: an anchor into a file that is not markdown")
                elif anchor not in anchors(dest):
                    problems.append(f"{doc}:{n}: link to {target}: {dest} has no heading #{anchor}")


# (b) flags
def helps():
    def run(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            problems.append(f"cannot run {' '.join(cmd)}: {e}")
            return ""
    out = [run(daemon, "--help"), run(plugin, "--help")]
    # The plugin's subcommands print their own options.
    subs = set()
    in_subs = False
    for line in out[1].split("\n"):
        if re.match(r"\s*SUBCOMMANDS?:?\s*$", line, re.I):
            in_subs = True
            continue
        if in_subs:
            m = re.match(r"\s+([a-z][a-z-]*)\b", line)
            if m:
                subs.add(m.group(1))
            elif line.strip() and not line.startswith(" "):
                in_subs = False
    for sub in sorted(subs | {"preview", "pending", "explain"}):
        out.append(run(plugin, sub, "--help"))
    return "\n".join(out)


have_binaries = all(os.access(b, os.X_OK) and os.path.isfile(b) for b in (daemon, plugin))
known = set()
if have_binaries:
    known = set(re.findall(r"--[a-z0-9][a-z0-9-]*", helps()))
    if "--help" not in known or "--kubeconfig" not in known:
        problems.append("could not read the flags from the binaries' --help")
OURS = re.compile(r"^(?:\$\s+)?(?:taint-eviction-controller|kubectl taint-eviction|kubectl-taint_eviction)\b")
flags_checked = 0


def check_flags(doc, n, flags):
    global flags_checked
    for flag in flags:
        flags_checked += 1
        if flag not in known and flag not in NOT_OURS:
            problems.append(f"{doc}:{n}: {flag} is in neither binary's --help")


for doc in FLAG_DOCS if have_binaries else []:
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    for n, line, fenced in prose_lines(text):
        if fenced:
            body = line.strip()
            if OURS.match(body):
                check_flags(doc, n, re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", body))
            continue
        for span in code_spans(line):
            span = span.strip()
            if span.startswith("--"):
                m = re.match(r"--[a-z0-9][a-z0-9-]*", span)
                if m:
                    check_flags(doc, n, [m.group(0)])
            elif OURS.match(span):
                check_flags(doc, n, re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", span))

# (c) metric names
sources = []
for dirpath, dirnames, filenames in os.walk("."):
    dirnames[:] = [d for d in dirnames
                   if not d.startswith(".") and not d.startswith("build")
                   and os.path.join(dirpath, d) not in ("./tests", "./bench", "./fuzz")]
    for name in filenames:
        if name.endswith((".cpp", ".hpp")):
            with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                sources.append(f.read())
source = "\n".join(sources)
metrics_checked = set()
for doc in LINKED:
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    for n, line in enumerate(text.split("\n"), 1):
        for name in re.findall(r"taint_eviction_controller_[a-z0-9_]*", line):
            if name.endswith("_"):  # the prefix itself, or a glob such as ..._shadow_*
                continue
            candidates = [name] + [name[: -len(s)] for s in ("_bucket", "_sum", "_count")
                                   if name.endswith(s)]
            metrics_checked.add(name)
            short = [c[len("taint_eviction_controller_"):] for c in candidates]
            if not any(c in source for c in candidates) and \
                    not any(f'"{s}"' in source for s in short):
                problems.append(f"{doc}:{n}: metric {name} is declared nowhere in the source")

for p in problems:
    print(p)
print(f"docs.links: {len(LINKED)} files, {links_checked} relative links, {flags_checked} flags, "
      f"{len(metrics_checked)} metric names checked; {len(problems)} problems")
if problems:
    sys.exit(1)
if not have_binaries:
    print(f"flags not checked: {daemon} or {plugin} is not built")
    sys.exit(77)
PY
