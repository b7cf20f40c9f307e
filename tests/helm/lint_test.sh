#!/usr/bin/env bash
# `helm lint` (with the schema) of the chart with its default values and with every optional
# part switched the other way, and `helm template` of each.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$root"
variants=(
  ""
  "--set namespace.create=true"
  "--set webhook.enabled=false,metrics.secure=false,flowSchema.enabled=false,networkPolicy.enabled=false,pdb.enabled=false"
  "--set monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true"
  "--set image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,requireReplicasOnDifferentNodes=false"
  "--kube-version 1.28.0 --set flowSchema.apiVersion=flowcontrol.apiserver.k8s.io/v1beta3 --set-json extraArgs=[\"--log-format=json\"]"
  "--set shadow=true,logging.format=json,logging.verbosity=4,podAnnotations.a=b,podLabels.team=infra,serviceAccount.annotations.a=b,nodeSelector.kubernetes\\.io/os=linux,fullnameOverride=tec --set-json tolerations=[{\"key\":\"k\",\"operator\":\"Exists\"}] --set-json affinity={\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[]}}"
  "--set monitoring.prometheus.serviceAccount.name=prom,monitoring.prometheus.serviceAccount.namespace=monitoring --set-json networkPolicy.controlPlane.cidrs=[\"10.0.0.0/24\"] --set-json networkPolicy.controlPlane.namespaceSelector={\"matchLabels\":{\"kubernetes.io/metadata.name\":\"kube-system\"}}"
)
failures=0
checks=0
for v in "${variants[@]}"; do
  checks=$((checks + 1))
  # shellcheck disable=SC2086  # each variant is a list of flags
  if ! out=$(helm lint --strict "$chart" $v 2>&1); then
    echo "FAIL: helm lint $v"; echo "$out"; failures=$((failures + 1)); continue
  fi
  # shellcheck disable=SC2086
  if ! out=$(helm template tec "$chart" -n taint-eviction-controller $v 2>&1); then
    echo "FAIL: helm template $v"; echo "$out"; failures=$((failures + 1)); continue
  fi
  echo "ok: helm lint + template ${v:-(defaults)}"
done
# A cluster that serves neither policy/v1 nor flowcontrol v1 (Kubernetes 1.20, as the real
# node's): the PDB and the FlowSchemas in the versions it serves.
checks=$((checks + 1))
out=$(helm template tec "$chart" --kube-version 1.20.0 \
  --api-versions flowcontrol.apiserver.k8s.io/v1beta1/FlowSchema \
  --api-versions policy/v1beta1/PodDisruptionBudget 2>&1) || true
if [ "$(grep -c '^apiVersion: flowcontrol.apiserver.k8s.io/v1beta1$' <<<"$out")" != 2 ] ||
   ! grep -q '^apiVersion: policy/v1beta1$' <<<"$out"; then
  echo "FAIL: on 1.20 the chart does not pick policy/v1beta1 and flowcontrol v1beta1: $out" | head -20
  failures=$((failures + 1))
fi
# The webhook is served on the secure port: the chart refuses it without one.
checks=$((checks + 1))
if out=$(helm template tec "$chart" --set metrics.secure=false 2>&1); then
  echo "FAIL: metrics.secure=false with the webhook on rendered"; failures=$((failures + 1))
elif ! grep -q "webhook.enabled needs metrics.secure" <<<"$out"; then
  echo "FAIL: metrics.secure=false with the webhook on: unexpected error: $out"
  failures=$((failures + 1))
fi
# freshNodeCheck: the flag and the `get` on nodes it needs, together; neither by default.
checks=$((checks + 1))
on=$(helm template tec "$chart" --set freshNodeCheck=true 2>&1) || true
off=$(helm template tec "$chart" 2>&1) || true
if ! grep -q -- '- --fresh-node-check$' <<<"$on" ||
   ! grep -A1 'resources: \["nodes"\]' <<<"$on" | grep -q 'verbs: \["get", "list", "watch"\]' ||
   grep -q -- '--fresh-node-check' <<<"$off" ||
   ! grep -A1 'resources: \["nodes"\]' <<<"$off" | grep -q 'verbs: \["list", "watch"\]$'; then
  echo "FAIL: freshNodeCheck does not give the flag with get on nodes (or the default has them)"
  failures=$((failures + 1))
fi
# monitoring.prometheusRule.runbookURL: every alert's runbook_url points there, at its section.
checks=$((checks + 1))
alerts=$(grep -c '^ *- alert: ' "$chart/files/prometheusrule.yaml")
url=https://git.example.com/tec/blob/v0.1.0/docs/runbook.md
on=$(helm template tec "$chart" --set monitoring.prometheusRule.enabled=true \
  --set monitoring.prometheusRule.runbookURL=$url 2>&1) || true
off=$(helm template tec "$chart" --set monitoring.prometheusRule.enabled=true 2>&1) || true
if [ "$alerts" -lt 1 ] || [ "$(grep -c "runbook_url: $url#taintevict" <<<"$on")" != "$alerts" ] ||
   [ "$(grep -c 'runbook_url: docs/runbook.md#taintevict' <<<"$off")" != "$alerts" ]; then
  echo "FAIL: runbookURL does not set the $alerts alerts' runbook_url (or the default changed)"
  failures=$((failures + 1))
fi
# Another namespace: every namespaced object in it, and the ServiceMonitor verifies the
# certificate for the Service's name there (the controller's certificate names its namespace).
checks=$((checks + 1))
out=$(helm template tec "$chart" -n other --set monitoring.serviceMonitor.enabled=true \
  --set monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true 2>&1) || true
if ! grep -q '^ *serverName: taint-eviction-controller-metrics\.other\.svc$' <<<"$out" ||
   grep -q 'taint-eviction-controller\.svc' <<<"$out" ||
   grep -Eq '^ *namespace: (taint-eviction-controller|"taint-eviction-controller")$' <<<"$out"; then
  echo "FAIL: -n other: serverName or a namespace is not the release's:"
  grep -E 'serverName|namespace:' <<<"$out"
  failures=$((failures + 1))
fi
# fullnameOverride renames every object, and the flags and RBAC that name them follow.
checks=$((checks + 1))
out=$(helm template tec "$chart" -n other --set fullnameOverride=tec \
  --set monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true \
  --set monitoring.dashboard.enabled=true 2>&1) || true
if grep -Eq '^ *name: taint-eviction-controller(-|$)|resourceNames: \["taint' <<<"$out" ||
   ! grep -q '^ *serverName: tec-metrics\.other\.svc$' <<<"$out" ||
   [ "$(grep -cE -- '- --(leader-elect-resource-name=tec|webhook-configuration=tec|webhook-service=tec-metrics|policy-configmap=tec-policy|webhook-cert-secret=tec-webhook-tls)$' <<<"$out")" != 5 ]; then
  echo "FAIL: fullnameOverride=tec: an object, a flag or a resourceName keeps the default name:"
  grep -E 'name: taint-eviction-controller|resourceNames|serverName|- --' <<<"$out"
  failures=$((failures + 1))
fi
# freshNodeCheck is the only way to the fresh check (it also grants get on nodes): the flag in
# extraArgs, in any spelling, and its environment variable are refused at render.
for arg in '"--fresh-node-check"' '"--fresh-node-check=true"' '"--fresh-node-check=false"'; do
  checks=$((checks + 1))
  if out=$(helm template tec "$chart" --set-json "extraArgs=[\"--v=2\",$arg]" 2>&1) ||
     ! grep -q "extraArgs: $arg: set freshNodeCheck: true instead" <<<"$out"; then
    echo "FAIL: extraArgs [$arg] was not refused with a word on freshNodeCheck: $out"
    failures=$((failures + 1))
  fi
done
checks=$((checks + 1))
if out=$(helm template tec "$chart" \
     --set-json 'extraEnv=[{"name":"TEC_FRESH_NODE_CHECK","value":"true"}]' 2>&1) ||
   ! grep -q "TEC_FRESH_NODE_CHECK: set freshNodeCheck: true instead" <<<"$out"; then
  echo "FAIL: extraEnv TEC_FRESH_NODE_CHECK was not refused: $out"; failures=$((failures + 1))
fi
# shadow and logging: their flags, none by default; the same flag again in extraArgs is refused
# (the controller would exit 2).
checks=$((checks + 1))
on=$(helm template tec "$chart" --set shadow=true,logging.format=json,logging.verbosity=4 \
  --show-only templates/deployment.yaml 2>&1) || true
off=$(helm template tec "$chart" --show-only templates/deployment.yaml 2>&1) || true
if [ "$(grep -cE -- '^ *- --(shadow|logging-format=json|v=4)$' <<<"$on")" != 3 ] ||
   grep -qE -- '--(shadow|logging-format|v=)' <<<"$off"; then
  echo "FAIL: shadow/logging.format/logging.verbosity do not give --shadow, --logging-format=json, --v=4 (or the defaults give flags)"
  failures=$((failures + 1))
fi
checks=$((checks + 1))
if helm template tec "$chart" --set logging.verbosity=4 --set-json 'extraArgs=["--v=2"]' >/dev/null 2>&1 ||
   helm template tec "$chart" --set logging.format=json --set-json 'extraArgs=["--log-format=text"]' >/dev/null 2>&1 ||
   helm template tec "$chart" --set logging.verbosity=11 >/dev/null 2>&1 ||
   helm template tec "$chart" --set logging.format=xml >/dev/null 2>&1; then
  echo "FAIL: a logging value given twice, or out of its range, was accepted"
  failures=$((failures + 1))
fi
# The common keys: podAnnotations, podLabels (never the selector's), serviceAccount.annotations,
# affinity beside the chart's anti-affinity, tolerations after the chart's three.
checks=$((checks + 1))
out=$(helm template tec "$chart" --set podAnnotations.a=b,podLabels.team=infra \
  --set serviceAccount.annotations.c=d \
  --set-json 'affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}]}}}' \
  --set-json 'tolerations=[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"example.com/infra","operator":"Exists"}]' 2>&1) || true
got=$("$python" -c '
import sys, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(sys.stdin) if d}
pod = docs["Deployment"]["spec"]["template"]
spec = pod["spec"]
print(pod["metadata"]["labels"].get("team"), pod["metadata"]["annotations"],
      docs["ServiceAccount"]["metadata"]["annotations"],
      sorted(spec["affinity"]), len(spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]),
      [t["key"] for t in spec["tolerations"]])
' <<<"$out" 2>&1)
want="infra {'a': 'b'} {'c': 'd'} ['nodeAffinity', 'podAntiAffinity'] 1 ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable', 'node-role.kubernetes.io/control-plane', 'example.com/infra']"
if [ "$got" != "$want" ]; then
  echo "FAIL: the common keys render as"; echo "  $got"; echo "expected"; echo "  $want"
  failures=$((failures + 1))
fi
checks=$((checks + 1))
if helm template tec "$chart" --set podLabels.app\\.kubernetes\\.io/component=x >/dev/null 2>&1; then
  echo "FAIL: podLabels could change the selector's app.kubernetes.io/component"
  failures=$((failures + 1))
fi
# monitoring.prometheus.serviceAccount: bound to the metrics-reader ClusterRole, its namespace
# admitted to the metrics port; the name without the namespace is refused.
checks=$((checks + 1))
out=$(helm template tec "$chart" -n other --set monitoring.prometheus.serviceAccount.name=prom \
  --set monitoring.prometheus.serviceAccount.namespace=monitoring 2>&1) || true
binding=$("$python" -c '
import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"].endswith("-metrics-reader"):
        print(d["roleRef"]["name"], *("/".join([s["kind"], s["namespace"], s["name"]])
                                      for s in d["subjects"]))
' <<<"$out")
if [ "$binding" != "taint-eviction-controller-metrics-reader ServiceAccount/monitoring/prom" ] ||
   ! grep -A2 'namespaceSelector:' <<<"$out" | grep -q 'kubernetes.io/metadata.name: monitoring$'; then
  echo "FAIL: monitoring.prometheus.serviceAccount: binding '$binding', or its namespace not admitted"
  failures=$((failures + 1))
fi
checks=$((checks + 1))
if out=$(helm template tec "$chart" --set monitoring.prometheus.serviceAccount.name=prom 2>&1) ||
   ! grep -q 'needs monitoring.prometheus.serviceAccount.namespace' <<<"$out"; then
  echo "FAIL: monitoring.prometheus.serviceAccount.name without a namespace: $out"
  failures=$((failures + 1))
fi
checks=$((checks + 1))
if [ "$(helm template tec "$chart" | grep -c 'name: taint-eviction-controller-metrics-reader$')" != 1 ]; then
  echo "FAIL: a metrics-reader binding by default"; failures=$((failures + 1))
fi
# networkPolicy.controlPlane: the webhook's port admitted from the API servers' addresses (the
# calls come from the control plane's node addresses, which no namespace selects).
checks=$((checks + 1))
out=$(helm template tec "$chart" --show-only templates/networkpolicy.yaml \
  --set-json 'networkPolicy.controlPlane.cidrs=["10.0.0.10/32","fd00:10::/64"]' 2>&1) || true
rules=$("$python" -c '
import sys, yaml
d = yaml.safe_load(sys.stdin)
for r in d["spec"]["ingress"]:
    print(",".join(p["port"] for p in r["ports"]), *(sorted(str(f) for f in r["from"])))
' <<<"$out")
want="metrics {'namespaceSelector': {'matchLabels': {'taint-eviction-controller.io/metrics': 'allowed'}}}
metrics {'ipBlock': {'cidr': '10.0.0.10/32'}} {'ipBlock': {'cidr': 'fd00:10::/64'}}"
if [ "$rules" != "$want" ]; then
  echo "FAIL: networkPolicy.controlPlane.cidrs: the ingress rules are:"; echo "$rules"
  failures=$((failures + 1))
fi
# No source at all is no ingress, not an empty `from` (which admits everyone).
checks=$((checks + 1))
out=$(helm template tec "$chart" --show-only templates/networkpolicy.yaml \
  --set networkPolicy.metricsNamespaceLabel=null 2>&1) || true
if ! grep -q '^  ingress: \[\]$' <<<"$out"; then
  echo "FAIL: networkPolicy without sources: $out"; failures=$((failures + 1))
fi
# Without the webhook's certificate Secret the secure port's certificate is self-signed: the
# ServiceMonitor then skips verification instead of naming a Secret that does not exist.
checks=$((checks + 1))
out=$(helm template tec "$chart" --set monitoring.serviceMonitor.enabled=true \
  --set webhook.enabled=false --show-only templates/monitoring.yaml 2>&1) || true
if ! grep -q 'insecureSkipVerify: true' <<<"$out" || grep -q 'webhook-tls' <<<"$out"; then
  echo "FAIL: webhook.enabled=false: the ServiceMonitor's tlsConfig: $out"
  failures=$((failures + 1))
fi
# An unknown value is refused (additionalProperties false), so a typo is not silently ignored.
checks=$((checks + 1))
if helm template tec "$chart" --set replica=3 >/dev/null 2>&1; then
  echo "FAIL: the unknown value 'replica' was accepted"; failures=$((failures + 1))
fi
# NOTES.txt, rendered offline (helm template leaves it out, helm install --dry-run needs a
# cluster): in a copy of the chart, as a named template that a ConfigMap prints.
notes_chart=$(mktemp -d)
trap 'rm -rf "$notes_chart"' EXIT
cp -r "$chart" "$notes_chart/chart"
{ echo '{{- define "tec.notes" }}'; cat "$chart/templates/NOTES.txt"; echo '{{- end }}'; } \
  >"$notes_chart/chart/templates/_notes.tpl"
rm "$notes_chart/chart/templates/NOTES.txt"
printf 'notes: |\n{{ include "tec.notes" . | indent 2 }}\n' >"$notes_chart/chart/templates/notes.yaml"
notes() {
  helm template tec "$notes_chart/chart" --show-only templates/notes.yaml "$@" 2>&1 |
    "$python" -c 'import sys, yaml; print(yaml.safe_load(sys.stdin)["notes"])'
}
checks=$((checks + 1))
out=$(notes -n other --set monitoring.serviceMonitor.enabled=true) || true
for want in 'installed as taint-eviction-controller in namespace other' \
    'kubectl -n other rollout status deployment/taint-eviction-controller' \
    'docs/switching-over.md' '--set shadow=true' \
    'kubectl taint-eviction --controller-namespace other pending -A' 'make install-plugin' \
    'No Prometheus ServiceAccount is bound to taint-eviction-controller-metrics-reader' \
    'Set networkPolicy.controlPlane.cidrs'; do
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: NOTES.txt (-n other, ServiceMonitor on) lacks '$want':"; echo "$out"
    failures=$((failures + 1)); break
  fi
done
checks=$((checks + 1))
out=$(notes -n taint-eviction-controller --set shadow=true,monitoring.serviceMonitor.enabled=true \
  --set monitoring.prometheus.serviceAccount.name=prom \
  --set monitoring.prometheus.serviceAccount.namespace=monitoring \
  --set-json 'networkPolicy.controlPlane.cidrs=["10.0.0.10/32"]') || true
if ! grep -q 'It runs in advisor mode (shadow mode)' <<<"$out" ||
   ! grep -q "ServiceAccount monitoring/prom is bound" <<<"$out" ||
   grep -qE 'No Prometheus|controlPlane.cidrs|--controller-namespace' <<<"$out"; then
  echo "FAIL: NOTES.txt (shadow, Prometheus bound, control plane admitted):"; echo "$out"
  failures=$((failures + 1))
fi
# `helm upgrade --reuse-values` from a release of 0.1.0 renders with that chart's values.yaml,
# without the keys added since: the chart must render the same objects from it.
checks=$((checks + 1))
cp -r "$chart" "$notes_chart/old"
"$python" - "$notes_chart/old/values.yaml" <<'PY'
import sys, yaml
v = yaml.safe_load(open(sys.argv[1]))
for key in ("nameOverride", "fullnameOverride", "podAnnotations", "podLabels", "serviceAccount",
            "shadow", "logging", "affinity"):
    del v[key]
del v["networkPolicy"]["metricsFrom"], v["networkPolicy"]["controlPlane"]
del v["monitoring"]["prometheus"]
v["tolerations"] = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]
yaml.safe_dump(v, open(sys.argv[1], "w"))
PY
all_on=(--set "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true")
if ! old=$(helm template tec "$notes_chart/old" "${all_on[@]}" 2>&1) ||
   [ "$old" != "$(helm template tec "$chart" "${all_on[@]}" 2>&1)" ]; then
  echo "FAIL: the values of a 0.1.0 release (helm upgrade --reuse-values) render otherwise:"
  diff <(echo "$old") <(helm template tec "$chart" "${all_on[@]}" 2>&1) | head -20
  failures=$((failures + 1))
fi
echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
