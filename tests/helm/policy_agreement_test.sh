#!/usr/bin/env bash
# One grammar: the chart refuses exactly the policies the controller refuses, because the
# controller is what checks them (templates/policy-check.yaml: helm install and helm upgrade
# run the image's --check-policy first). Offline, for every case of policy_cases.txt:
# - the binary's --check-policy gives the case's verdict (the grammar, policy/src/policy_file.cpp);
# - the chart renders it, or refuses it while reading the values (a policy that is not a map);
# - what it renders, the ConfigMap's policy.yaml and the check Job's copy of it are the same
#   text, and --check-policy gives that text the case's verdict too: rendering neither loses an
#   error nor adds one. No policy renders no Job (upstream's behaviour needs no check).
# tests/e2e-node/helm_test.sh runs the Job on a real node. Needs the binary (TEC_BIN).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bin=${TEC_BIN:-$root/build/bin/taint-eviction-controller}
if [ ! -x "$bin" ]; then
  echo "SKIP: no controller binary at $bin (set TEC_BIN)"
  exit 77
fi
exec "$python" - "$chart" "$bin" "$(dirname "$0")/policy_cases.txt" <<'PY'
import os, subprocess, sys, tempfile, yaml
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
annotation = "taint-eviction-controller.io/policy"

def controller_accepts(text):
    path = os.path.join(tmp, "policy.yaml")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([binary, "--check-policy", path], capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()

def chart_renders(body):
    """(rendered, the ConfigMap's policy.yaml, the Job's copy or None, helm's error)."""
    path = os.path.join(tmp, "values.yaml")
    with open(path, "w") as f:
        f.write("policy:\n" + "".join("  " + l for l in body))
    r = subprocess.run(["helm", "template", "tec", chart, "-f", path, "--show-only",
                        "templates/policy.yaml", "--show-only", "templates/policy-check.yaml"],
                       capture_output=True, text=True)
    if r.returncode != 0 and "could not find template templates/policy-check.yaml" in r.stderr:
        r = subprocess.run(["helm", "template", "tec", chart, "-f", path, "--show-only",
                            "templates/policy.yaml"], capture_output=True, text=True)
    if r.returncode != 0:
        return False, None, None, r.stderr.strip()
    docs = {d["kind"]: d for d in yaml.safe_load_all(r.stdout) if d}
    job = docs.get("Job")
    copy = job["spec"]["template"]["metadata"]["annotations"][annotation] if job else None
    return True, docs["ConfigMap"]["data"]["policy.yaml"], copy, ""

failed = 0
for verdict, name, body in cases:
    want = verdict == "good"
    text = "".join(body)
    # A body that sets apiVersion or kind itself: the binary reads those lines, not the header's.
    sets_header = any(l.startswith(("apiVersion:", "kind:")) for l in body)
    c_ok, c_out = controller_accepts(text if sets_header else header + text)
    problems = []
    if c_ok != want:
        problems.append(f"controller {'accepts' if c_ok else 'rejects'}: {c_out[:400]}")
    rendered, config, copy, h_err = chart_renders(body)
    if not rendered:
        if want:
            problems.append(f"chart refuses a good policy: {h_err[:400]}")
    else:
        empty = not yaml.safe_load(text)
        if copy is None and not empty:
            problems.append("no policy-check Job rendered for a policy")
        if copy is not None and copy.rstrip("\n") != config.rstrip("\n"):
            problems.append(f"the Job checks other text than the ConfigMap holds: {copy!r} vs {config!r}")
        r_ok, r_out = controller_accepts(config)
        if r_ok != want:
            problems.append(f"controller {'accepts' if r_ok else 'rejects'} the chart's rendering: {r_out[:400]}")
    if problems:
        failed += 1
        print(f"FAIL: {verdict}: {name}: " + "; ".join(problems))
    else:
        print(f"ok: {verdict}: {name}" + ("" if rendered else " (refused by helm: " + h_err.splitlines()[0][:120] + ")"))
print(f"{len(cases) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
