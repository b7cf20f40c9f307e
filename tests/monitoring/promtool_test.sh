#!/usr/bin/env bash
# The monitoring kit's unit tests (ctest monitoring.*, label unit): the rule file extracted from
# charts/taint-eviction-controller/files/prometheusrule.yaml passes `promtool check rules` and the alert unit tests
# of rules_test.yaml (`promtool test rules`: each alert fires when it should and stays silent
# when it should); dashboard.json and the rules name only metrics the code registers
# (check_dashboard.py); and deploy/ with the component deploy/monitoring/ (rendered from the
# chart) builds with kustomize into the three
# objects, the ConfigMap holding dashboard.json as it is.
# promtool is Debian's `prometheus` package (scripts/install-deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
command -v promtool >/dev/null 2>&1 \
  || { echo "FAIL: promtool not found: install Debian's prometheus (scripts/install-deps.sh)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tec-promtool.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 "$here/extract_rules.py" "$repo/charts/taint-eviction-controller/files/prometheusrule.yaml" "$work/rules.yaml"
cp "$here/rules_test.yaml" "$work/rules_test.yaml"  # its rule_files: rules.yaml, beside it
case "${1:-all}" in
  check) promtool check rules "$work/rules.yaml" ;;
  test) (cd "$work" && promtool test rules rules_test.yaml) ;;
  dashboard) python3 "$here/check_dashboard.py" "$repo/charts/taint-eviction-controller/files" ;;
  kustomize)
    command -v kubectl >/dev/null 2>&1 || { echo "FAIL: kubectl not found" >&2; exit 1; }
    mkdir "$work/overlay"
    rel=$(realpath --relative-to="$work/overlay" "$repo/deploy")
    printf 'resources: [%s]\ncomponents: [%s/monitoring]\n' "$rel" "$rel" >"$work/overlay/kustomization.yaml"
    kubectl kustomize "$work/overlay" >"$work/built.yaml"
    python3 - "$work/built.yaml" "$repo/charts/taint-eviction-controller/files/dashboard.json" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def one(kind, name):
    got = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name
           and d["metadata"].get("namespace") == "taint-eviction-controller"]
    if len(got) != 1:
        sys.exit(f"FAIL: {len(got)} {kind} {name} in the build, expected 1")
    return got[0]
one("ServiceMonitor", "taint-eviction-controller")
one("PrometheusRule", "taint-eviction-controller")
cm = one("ConfigMap", "taint-eviction-controller-dashboard")
if cm["metadata"]["labels"].get("grafana_dashboard") != "1":
    sys.exit("FAIL: the dashboard ConfigMap lacks grafana_dashboard: \"1\"")
if cm["data"].get("taint-eviction-controller.json") != open(sys.argv[2]).read():
    sys.exit("FAIL: the dashboard ConfigMap does not hold dashboard.json as it is")
print(f"kustomize: {len(docs)} objects, the kit's three among them")
PY
    ;;
  all)
    promtool check rules "$work/rules.yaml"
    (cd "$work" && promtool test rules rules_test.yaml)
    python3 "$here/check_dashboard.py" "$repo/charts/taint-eviction-controller/files"
    bash "$here/promtool_test.sh" kustomize
    ;;
  *) echo "usage: $0 [check|test|dashboard|kustomize|all]" >&2; exit 2 ;;
esac
