#!/usr/bin/env bash
# The daemon binary on the hostile policy files of issue 29 (generated as the adversarial pass
# wrote them): started with --policy FILE, and asked --check-policy FILE, it refuses each with
# one bounded, escaped error line, and its peak resident set (wait4's ru_maxrss) stays under
# 64 MB. Before the walk budget: 574 MB and a 167 MB line for the 13 KB file, 73 MB for the
# valid 10 KB one (accepted then). ru_maxrss after fork and exec is at least the forking
# process's own peak (about 14 MB of Python here): an upper bound, which is what is checked.
# No cluster: the policy is read before anything else. Skipped (77) when the binary is not
# built (the sanitizer presets build only the unit test executables).
set -euo pipefail

bin=${TEC_BIN:?TEC_BIN: the taint-eviction-controller binary}
if [ ! -x "$bin" ]; then
  echo "skipped: $bin is not built"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

exec python3 - "$bin" "$dir" <<'EOF'
import os, subprocess, sys

binary, work = sys.argv[1], sys.argv[2]
limit_kib = 64 * 1024
header = "apiVersion: taint-eviction-controller/v1alpha1\nkind: EvictionPolicy\n"
keys = ", ".join("k%d: 1" % i for i in range(1000))
values = ", ".join("v%d" % i for i in range(1000))
files = {
    # taints: [&r {1000 unknown keys}, *r x 999]: 12,968 bytes
    "aliased-unknown-keys.yaml": header + "taints: [&r {" + keys + "}" + ", *r" * 999 + "]\n",
    # a valid selector whose aliases expand to a million values: 10,038 bytes
    "aliased-valid-selector.yaml": header + "exclude:\n  podSelector:\n    matchExpressions: "
    "[&e {key: k, operator: In, values: [" + values + "]}" + ", *e" * 999 + "]\n",
}
assert len(files["aliased-unknown-keys.yaml"]) == 12968
assert len(files["aliased-valid-selector.yaml"]) == 10038

failures = []
# The floor: this script's own peak (see below) or the binary's at rest, whichever is higher.
proc = subprocess.Popen([binary, "--version"], stdout=subprocess.DEVNULL)
print("--version: peak RSS %d KiB (the floor of the numbers below)" % os.wait4(proc.pid, 0)[2].ru_maxrss)
proc.returncode = 0
for name, text in files.items():
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    for args, want_rc in ((["--check-policy", path], 1),
                          (["--policy", path, "--kubeconfig", os.path.join(work, "none")], 2)):
        out_path = os.path.join(work, "out")
        err_path = os.path.join(work, "err")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen([binary] + args, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        # Read a bounded prefix only: a fork of this process hands its own peak RSS to the
        # child's ru_maxrss (exec keeps the higher of the two), so it must stay small.
        err_size = os.path.getsize(err_path)
        with open(err_path, "rb") as f:
            err_text = f.read(65536)
        what = "%s %s" % (args[0], name)
        print("%s: exit %d, peak RSS %d KiB, stderr %d bytes" %
              (what, proc.returncode, usage.ru_maxrss, err_size))
        if proc.returncode != want_rc:
            failures.append("%s: exit %d, expected %d" % (what, proc.returncode, want_rc))
        if usage.ru_maxrss >= limit_kib:
            failures.append("%s: peak RSS %d KiB, over %d" % (what, usage.ru_maxrss, limit_kib))
        lines = [l for l in err_text.split(b"\n") if l and not l.startswith(b"Run with --help")]
        if len(lines) != 1 or err_size > 4096:
            failures.append("%s: %d error lines (%d bytes), expected one bounded line" %
                            (what, len(lines), err_size))
        elif b"aliases (*name) expand this document" not in lines[0]:
            failures.append("%s: unexpected message: %r" % (what, lines[0][:300]))
        elif any(b < 0x20 or b == 0x7F for b in lines[0]):
            failures.append("%s: a control byte in %r" % (what, lines[0][:300]))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
EOF
