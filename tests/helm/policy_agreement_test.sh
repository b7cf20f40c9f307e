#!/usr/bin/env bash
# The chart's policy checks (values.schema.json and templates/_helpers.tpl) and the
# controller's (--check-policy, policy/src/policy_file.cpp) agree: every case of
# policy_cases.txt is fed to both, each must give the case's verdict, and what the chart renders
# for a good case must be accepted by the controller too. Needs the daemon binary (TEC_BIN).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bin=${TEC_BIN:-$root/build/bin/taint-eviction-controller}
if [ ! -x "$bin" ]; then
  echo "SKIP: no controller binary at $bin (set TEC_BIN)"
  exit 77
fi
exec "$python" - "$chart" "$bin" "$(dirname "$0")/policy_cases.txt" <<'PY'
import os, subprocess, sys, tempfile
chart, binary, cases_path = sys.argv[1:4]
cases, name = [], None
for line in open(cases_path):
    if line.startswith("### "):
        verdict, name = line[4:].rstrip("\n").split(": ", 1)
        cases.append((verdict, name, []))
    elif name is not None:
        cases[-1][2].append(line)
tmp = tempfile.mkdtemp()
header = "apiVersion: taint-eviction-controller/v1alpha1\nkind: EvictionPolicy\n"

def controller_accepts(text):
    path = os.path.join(tmp, "policy.yaml")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([binary, "--check-policy", path], capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()

def chart_renders(body):
    path = os.path.join(tmp, "values.yaml")
    with open(path, "w") as f:
        f.write("policy:\n" + "".join("  " + l for l in body))
    r = subprocess.run(["helm", "template", "tec", chart, "-f", path, "--show-only",
                        "templates/policy.yaml"], capture_output=True, text=True)
    return r.returncode == 0, (r.stdout if r.returncode == 0 else r.stderr).strip()

failed = 0
for verdict, name, body in cases:
    want = verdict == "good"
    text = "".join(body)
    # A body that sets apiVersion or kind itself: the binary reads those lines, not the header's.
    sets_header = any(l.startswith(("apiVersion:", "kind:")) for l in body)
    c_ok, c_out = controller_accepts(text if sets_header else header + text)
    h_ok, h_out = chart_renders(body)
    problems = []
    if c_ok != want:
        problems.append(f"controller {'accepts' if c_ok else 'rejects'}: {c_out[:400]}")
    if h_ok != want:
        problems.append(f"chart {'accepts' if h_ok else 'rejects'}: {h_out[:400]}")
    if h_ok and want:
        import yaml
        rendered = yaml.safe_load(h_out)["data"]["policy.yaml"]
        r_ok, r_out = controller_accepts(rendered)
        if not r_ok:
            problems.append(f"controller rejects the chart's rendering: {r_out[:400]}")
    if problems:
        failed += 1
        print(f"FAIL: {verdict}: {name}: " + "; ".join(problems))
    else:
        print(f"ok: {verdict}: {name}")
print(f"{len(cases) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
