#!/usr/bin/env bash
# The chart and deploy/ cannot drift: `kubectl kustomize deploy/` and `helm template` with the
# default values (into the namespace deploy/ uses) must give the same objects. Normalised
# before comparing:
# - objects keyed by kind/namespace/name, in that order;
# - Helm's own labels dropped from metadata.labels: helm.sh/chart,
#   app.kubernetes.io/managed-by, app.kubernetes.io/instance, app.kubernetes.io/version;
# - the container image compared without its tag or digest (the chart names appVersion,
#   deploy/ the tag the release sets);
# - the policy ConfigMap's policy.yaml compared as parsed YAML (deploy/'s has comments);
# - metadata.namespace dropped from cluster-scoped kinds: kustomize puts its namespace on the
#   FlowSchemas, which it does not know are cluster-scoped (the API server ignores it there);
# - the Namespace: the chart leaves it to `kubectl create namespace` by default (Helm stores
#   the release in it first), so it is compared from a second render with namespace.create=true.
# The monitoring kit too: deploy/ with its component deploy/monitoring/ against a render with
# the three monitoring toggles on. The chart renders the kit from copies of deploy/monitoring/
# in its files/ (lint_test.sh checks they are copies) but sets what deploy/ writes for its own
# namespace (metadata.namespace, the ServiceMonitor's tlsConfig.serverName) from the release's;
# rendered into deploy/'s namespace, the result must be deploy/'s objects exactly.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
command -v kubectl >/dev/null 2>&1 || { echo "SKIP: kubectl is not on PATH"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kubectl kustomize deploy/ >"$tmp/kustomize.yaml"
helm template tec "$chart" -n taint-eviction-controller >"$tmp/helm.yaml"
helm template tec "$chart" -n taint-eviction-controller --set namespace.create=true \
  --show-only templates/namespace.yaml >"$tmp/helm-namespace.yaml"
mkdir "$tmp/overlay"
rel=$(realpath --relative-to="$tmp/overlay" "$root/deploy")
printf 'resources: [%s]\ncomponents: [%s/monitoring]\n' "$rel" "$rel" >"$tmp/overlay/kustomization.yaml"
kubectl kustomize "$tmp/overlay" >"$tmp/kustomize-monitoring.yaml"
helm template tec "$chart" -n taint-eviction-controller --show-only templates/monitoring.yaml \
  --set monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true \
  --set monitoring.dashboard.enabled=true >"$tmp/helm-monitoring.yaml"
exec "$python" - "$tmp" <<'PY'
import sys, yaml, json, difflib
tmp = sys.argv[1]
helm_labels = {"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version"}

cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "FlowSchema",
                  "ValidatingWebhookConfiguration"}

def load(path):
    out = {}
    for doc in yaml.safe_load_all(open(path)):
        if not doc:
            continue
        meta = doc.get("metadata", {})
        if doc["kind"] in cluster_scoped:
            meta.pop("namespace", None)
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in helm_labels}
        if labels:
            meta["labels"] = labels
        else:
            meta.pop("labels", None)
        if doc["kind"] == "Deployment":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                c["image"] = c["image"].split("@")[0].rsplit(":", 1)[0]
        if doc["kind"] == "ConfigMap" and "policy.yaml" in doc.get("data", {}):
            doc["data"]["policy.yaml"] = yaml.safe_load(doc["data"]["policy.yaml"])
        key = "/".join([doc["kind"], meta.get("namespace", ""), meta["name"]])
        if key in out:
            sys.exit(f"FAIL: {path}: {key} twice")
        out[key] = doc
    return out

kust = load(f"{tmp}/kustomize.yaml")
chart = load(f"{tmp}/helm.yaml")
chart.update(load(f"{tmp}/helm-namespace.yaml"))
kit = {k: v for k, v in load(f"{tmp}/kustomize-monitoring.yaml").items() if k not in kust}
if len(kit) != 3:
    sys.exit(f"FAIL: deploy/monitoring/ adds {len(kit)} objects to deploy/, expected 3")
kust.update(kit)
chart.update(load(f"{tmp}/helm-monitoring.yaml"))
failed = 0
for key in sorted(set(kust) | set(chart)):
    if key not in chart:
        print(f"FAIL: {key}: in deploy/, not in the chart"); failed += 1; continue
    if key not in kust:
        print(f"FAIL: {key}: in the chart, not in deploy/"); failed += 1; continue
    a = json.dumps(kust[key], indent=1, sort_keys=True).splitlines()
    b = json.dumps(chart[key], indent=1, sort_keys=True).splitlines()
    if a != b:
        failed += 1
        print(f"FAIL: {key} differs (--- deploy/, +++ chart):")
        print("\n".join(difflib.unified_diff(a, b, "deploy", "chart", lineterm="", n=2)))
    else:
        print(f"ok: {key}")
total = len(set(kust) | set(chart))
print(f"{total - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
