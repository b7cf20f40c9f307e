#!/usr/bin/env bash
# The chart on day one in a namespace of its own, scraped by a real Prometheus (Debian's):
#   - deploy/'s install is taken off (its cluster-scoped objects would clash) and the chart is
#     installed with `helm install -n <another namespace> --create-namespace`, monitoring on
#     (ServiceMonitor, PrometheusRule; their CRDs as stubs: no Prometheus Operator here),
#     monitoring.prometheus.serviceAccount naming Prometheus' ServiceAccount in a namespace of
#     its own, the NetworkPolicy on with networkPolicy.controlPlane.cidrs = the API server's
#     address, the webhook on;
#   - Prometheus runs on the node with the scrape configuration the Prometheus Operator writes
#     for that ServiceMonitor (tests/e2e-node/servicemonitor_scrape.py): the Service's endpoints
#     (discovered by the test: Debian's Prometheus has no Kubernetes discovery), HTTPS, the CA
#     from the Secret it names, its serverName, and the token of that ServiceAccount (`kubectl
#     create token`, as the operator mounts it); the PrometheusRule's rules loaded;
#   - both replicas are up (up == 1), is_leader sums to 1, and no alert of the rules is pending
#     or firing; the same scrape with the serverName the chart used to render (the controller's
#     default namespace), and one with a token of an unbound ServiceAccount, are down: the test
#     can tell a working scrape from a broken one;
#   - `kubectl taint --dry-run=server` shows the webhook's warning, the call coming from the
#     API server's address, which the rendered NetworkPolicy admits (the node's bridge CNI
#     does not enforce NetworkPolicy: the policy is checked against that address here);
#   - the kustomize install is put back at the end.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for c in helm prometheus promtool curl; do
  command -v "$c" >/dev/null 2>&1 || fail "$c not found on PATH (scripts/install-deps.sh installs it)"
done
readonly RELEASE=tec CHART="$REPO_ROOT/charts/taint-eviction-controller"
readonly REL_NS="tec-other-$SUFFIX" PROM_NS="tec-monitoring-$SUFFIX" PROM_SA=prometheus
readonly KUSTOMIZATION="$TEC_CLUSTER_DIR/node/deploy"
[ -f "$KUSTOMIZATION/kustomization.yaml" ] || fail "no $KUSTOMIZATION/kustomization.yaml (cluster.sh up --node writes it)"
h() { timeout 300 helm --kubeconfig "$KUBECONFIG" "$@"; }
PROM_PID=""

on_cleanup() {
  local p  # rc: the exit status, a local of lib.sh's cleanup (bash scoping is dynamic)
  [ -z "$PROM_PID" ] || { kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; }
  if [ "${rc:-0}" -ne 0 ]; then
    for p in $(k -n "$REL_NS" get pods -l "$CONTROLLER_SELECTOR" -o name 2>/dev/null); do
      echo "-- release $p (last 30 lines)" >&2
      k -n "$REL_NS" logs "$p" --tail=30 >&2
    done
    [ ! -f "$WORK/prometheus.log" ] || { echo "-- prometheus.log (last 20 lines)" >&2; tail -n 20 "$WORK/prometheus.log" >&2; }
  fi
  h uninstall "$RELEASE" -n "$REL_NS" --wait --timeout 120s >/dev/null 2>&1
  k delete namespace "$REL_NS" "$PROM_NS" --wait=false --ignore-not-found >/dev/null 2>&1
  k delete crd servicemonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com \
    --ignore-not-found >/dev/null 2>&1
  k apply -k "$KUSTOMIZATION" >/dev/null 2>&1
  timeout 180 kubectl -n "$CONTROLLER_NS" rollout status deployment/taint-eviction-controller \
    --timeout=170s >/dev/null 2>&1 || echo "$TEST_NAME: the kustomize install did not come back" >&2
}

wait_until 60 "the controller Deployment (kustomize) available with 2 replicas" controller_available 2

# deploy/'s install off, its Namespace kept (the later tests' kustomize install comes back).
kubectl kustomize "$KUSTOMIZATION" >"$WORK/kustomize.yaml" || fail "kubectl kustomize $KUSTOMIZATION failed"
python3 - "$WORK/kustomize.yaml" >"$WORK/kustomize-objects.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] != "Namespace"]
print(yaml.safe_dump_all(docs))
PY
k delete -f "$WORK/kustomize-objects.yaml" --ignore-not-found --wait=true >/dev/null \
  || fail "cannot delete the kustomize install"
no_controller_pods() { [ -z "$(k -n "$CONTROLLER_NS" get pods -l "$CONTROLLER_SELECTOR" -o name)" ]; }
wait_until 120 "the kustomize install's pods gone" no_controller_pods

# The Prometheus Operator's two CRDs, as stubs: the chart's objects are stored as written.
for kind in ServiceMonitor PrometheusRule; do
  plural="$(tr '[:upper:]' '[:lower:]' <<<"$kind")s"
  k apply -f - >/dev/null <<EOT || fail "cannot create the stub CRD $plural.monitoring.coreos.com"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: $plural.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: $kind, plural: $plural, listKind: ${kind}List}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOT
done
crds_established() {
  k get crd servicemonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{"\n"}{end}' \
    | grep -c True | matches -x 2
}
wait_until 60 "the stub CRDs established" crds_established

# Prometheus' namespace and ServiceAccount, as kube-prometheus-stack would have them.
k create namespace "$PROM_NS" >/dev/null || fail "cannot create namespace $PROM_NS"
k -n "$PROM_NS" create serviceaccount "$PROM_SA" >/dev/null || fail "cannot create ServiceAccount $PROM_NS/$PROM_SA"
k -n "$PROM_NS" create serviceaccount stranger >/dev/null || fail "cannot create ServiceAccount $PROM_NS/stranger"

image=$TEC_CLUSTER_CONTROLLER_IMAGE
cat >"$WORK/values.yaml" <<EOT
image:
  repository: ${image%:*}
  tag: "${image##*:}"
  pullPolicy: Never
requireReplicasOnDifferentNodes: false
tolerations:
  - {key: $TAINT_KEY, operator: Exists, effect: NoExecute}
monitoring:
  serviceMonitor: {enabled: true, interval: 5s}
  prometheusRule: {enabled: true}
  prometheus:
    serviceAccount: {name: $PROM_SA, namespace: $PROM_NS}
networkPolicy:
  enabled: true
  controlPlane:
    cidrs: ["$TEC_CLUSTER_NODE_IP/32"]
EOT
t0=$(now_ms)
h install "$RELEASE" "$CHART" -n "$REL_NS" --create-namespace -f "$WORK/values.yaml" --wait --timeout 240s \
  >"$WORK/install.out" 2>&1 || fail "helm install -n $REL_NS failed: $(cat "$WORK/install.out")"
log "helm install -n $REL_NS (monitoring, NetworkPolicy, webhook on): deployed in $(($(now_ms) - t0)) ms"
release_pods() {
  k -n "$REL_NS" get pods -l "$CONTROLLER_SELECTOR" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk '$2 == "Running" && NF == 2 { print $1 }'
}
two_release_pods() { [ "$(release_pods | grep -c .)" -eq 2 ]; }
wait_until 120 "two replicas of the release Running in $REL_NS" two_release_pods

# What the release rendered: the ServiceMonitor, the PrometheusRule, the NetworkPolicy.
for kind in servicemonitor prometheusrule networkpolicy; do
  k -n "$REL_NS" get "$kind" -o json >"$WORK/$kind.json" || fail "cannot read the release's ${kind}s"
done
server_name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["spec"]["endpoints"][0]["tlsConfig"]["serverName"])' "$WORK/servicemonitor.json")
[ "$server_name" = "taint-eviction-controller-metrics.$REL_NS.svc" ] \
  || fail "the ServiceMonitor's serverName is '$server_name', not the release's namespace's name"

# The webhook keeps its CA in the Secret the ServiceMonitor names: wait for the controller to
# have written it.
ca_secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["spec"]["endpoints"][0]["tlsConfig"]["ca"]["secret"]["name"])' "$WORK/servicemonitor.json")
has_ca() { [ -n "$(k -n "$REL_NS" get secret "$ca_secret" -o jsonpath='{.data.ca\.crt}' 2>/dev/null)" ]; }
wait_until 120 "the CA in Secret $REL_NS/$ca_secret" has_ca
k -n "$REL_NS" get secret "$ca_secret" -o jsonpath='{.data.ca\.crt}' | base64 -d >"$WORK/ca.crt" \
  || fail "cannot read $REL_NS/$ca_secret"

# The tokens the operator would mount: Prometheus' own, and one of a ServiceAccount nobody bound.
k -n "$PROM_NS" create token "$PROM_SA" --duration=1h >"$WORK/token" || fail "kubectl create token $PROM_NS/$PROM_SA failed"
k -n "$PROM_NS" create token stranger --duration=1h >"$WORK/stranger-token" || fail "kubectl create token $PROM_NS/stranger failed"

# Prometheus on the node: the scrape configuration the operator writes for the ServiceMonitor,
# and two negative controls beside it, each a job of its own.
# Both replicas ready, so both are in the Service's endpoints.
endpoints_ready() {
  k -n "$REL_NS" get endpoints -o json >"$WORK/endpoints.json" &&
    [ "$(python3 -c 'import json,sys; print(sum(len(s.get("addresses", [])) for e in json.load(open(sys.argv[1]))["items"] if e["metadata"]["name"].endswith("-metrics") for s in e.get("subsets", [])))' "$WORK/endpoints.json")" -eq 2 ]
}
wait_until 120 "both replicas in the metrics Service's endpoints" endpoints_ready
k -n "$REL_NS" get services -o json >"$WORK/services.json" || fail "cannot read the release's Services"
mkdir -p "$WORK/targets"
python3 "$E2E_DIR/servicemonitor_scrape.py" --servicemonitor "$WORK/servicemonitor.json" \
  --prometheusrule "$WORK/prometheusrule.json" --services "$WORK/services.json" \
  --endpoints "$WORK/endpoints.json" --targets-dir "$WORK/targets" --ca "$WORK/ca.crt" \
  --token "$WORK/token" --stranger-token "$WORK/stranger-token" \
  --wrong-server-name "taint-eviction-controller-metrics.taint-eviction-controller.svc" \
  --config "$WORK/prometheus.yml" --rules "$WORK/rules.yml" || fail "cannot write Prometheus' configuration"
promtool check config "$WORK/prometheus.yml" >"$WORK/promtool.out" 2>&1 \
  || fail "promtool check config: $(cat "$WORK/promtool.out")"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$port" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
BACKGROUND_PIDS+=("$PROM_PID")
query() {
  curl -fsS --max-time 10 "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$1" 2>/dev/null \
    | python3 2>/dev/null -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print("\n".join("%s %s" % (json.dumps(x["metric"], sort_keys=True), x["value"][1]) for x in r))'
}
count_of() { query "$1" | grep -c . || true; }
scraped() { [ "$(count_of 'up{job="taint-eviction-controller"} == 1')" -eq 2 ]; }
wait_until 120 "Prometheus scraping both replicas through the ServiceMonitor's settings (up == 1)" scraped
log "up: $(query 'up' | tr '\n' ';')"
[ "$(query 'sum(taint_eviction_controller_is_leader{job="taint-eviction-controller"})' | awk '{ print $NF }')" = 1 ] \
  || fail "is_leader does not sum to 1 over the scraped replicas: $(query 'taint_eviction_controller_is_leader')"

# The negative controls: down, for the reason each has.
controls_down() {
  [ "$(count_of 'up{job="control-wrong-server-name"} == 0')" -eq 2 ] &&
    [ "$(count_of 'up{job="control-unbound-token"} == 0')" -eq 2 ]
}
wait_until 120 "the two negative-control scrapes down" controls_down
targets=$(curl -fsS --max-time 10 "http://127.0.0.1:$port/api/v1/targets")
python3 - "$targets" <<'PY' || fail "the negative controls are down for the wrong reasons"
import json, sys
errors = {}
for t in json.loads(sys.argv[1])["data"]["activeTargets"]:
    errors.setdefault(t["labels"]["job"], []).append(t.get("lastError", ""))
wrong = errors.get("control-wrong-server-name", [])
stranger = errors.get("control-unbound-token", [])
print("wrong serverName:", wrong[0] if wrong else "-")
print("unbound token:", stranger[0] if stranger else "-")
ok = all("x509" in e or "certificate" in e for e in wrong) and len(wrong) == 2
ok = ok and all("403" in e for e in stranger) and len(stranger) == 2
sys.exit(0 if ok else 1)
PY

# The rules: loaded, and none pending or firing after several evaluations.
rules_loaded=$(curl -fsS --max-time 10 "http://127.0.0.1:$port/api/v1/rules" \
  | python3 -c 'import json,sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')
[ "${rules_loaded:-0}" -gt 0 ] || fail "Prometheus loaded no rule from the PrometheusRule"
sleep_s=20
log "waiting ${sleep_s} s of scrapes (every 5 s) and rule evaluations"
sleep "$sleep_s"
alerts=$(query 'ALERTS')
[ -z "$alerts" ] || fail "alerts pending or firing with the chart's rules: $alerts"
log "$rules_loaded rules loaded; no alert pending or firing"

# The webhook through the NetworkPolicy: the API server calls it from the node's address.
python3 - "$WORK/networkpolicy.json" "$TEC_CLUSTER_NODE_IP" <<'PY' || fail "the release's NetworkPolicy does not admit the API server's address to the webhook port"
import ipaddress, json, sys
addr = ipaddress.ip_address(sys.argv[2])
for policy in json.load(open(sys.argv[1]))["items"]:
    for rule in policy["spec"].get("ingress", []):
        if not any(p.get("port") in ("metrics", 8443) for p in rule.get("ports", [])):
            continue
        for peer in rule.get("from", []):
            block = peer.get("ipBlock")
            if block and addr in ipaddress.ip_network(block["cidr"]) and not any(
                    addr in ipaddress.ip_network(e) for e in block.get("except", [])):
                sys.exit(0)
sys.exit(1)
PY
k get validatingwebhookconfiguration taint-eviction-controller -o jsonpath='{.webhooks[0].clientConfig.service.namespace}' \
  | matches -x "$REL_NS" || fail "the webhook does not call the Service in $REL_NS"
has_ca_bundle() { [ -n "$(k get validatingwebhookconfiguration taint-eviction-controller -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]; }
wait_until 60 "the webhook's caBundle" has_ca_bundle
warned() {
  k taint nodes "$NODE" "tec.test/prometheus-e2e=x:NoExecute" --dry-run=server >"$WORK/taint.out" 2>&1 &&
    grep -q "^Warning: tainting $NODE with tec.test/prometheus-e2e=x:NoExecute evicts" "$WORK/taint.out"
}
wait_until 60 "the webhook's warning at kubectl taint --dry-run=server" warned
log "kubectl taint: $(grep -m1 '^Warning' "$WORK/taint.out")"
k get node "$NODE" -o jsonpath='{.spec.taints[*].key}' | grep -q prometheus-e2e \
  && fail "the dry run tainted the node"

echo "PASS: $TEST_NAME"
